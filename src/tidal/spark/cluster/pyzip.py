"""Bytecode in the PySpark zip that Spark puts first on every Python worker's path.

Every Python process Spark starts (a task's worker daemon, and on the driver the planners of a
Python data source: lookup, create, plan, the streaming source and sink runners) gets
``$SPARK_HOME/python/lib/pyspark.zip`` and the py4j zip *in front of* its ``PYTHONPATH`` (Spark's
``PythonWorkerFactory``), so it imports PySpark from that zip rather than from site-packages. The
zip in PySpark's wheel holds sources only, and a zip cannot take the bytecode Python would cache
beside a source, so every such process compiles the PySpark modules it imports, every time.
Measured on the 2-core box: ``import pyspark.worker`` from the zip 0.72-0.83 s, from a zip with
bytecode 0.22 s; a cold ``tidal run`` (local mode, three vertices) to its first message 14.1 s
→ 12.2 s (median of four), because a pipeline's first micro-batches start such processes one
after another; a new executor's two Python workers boot in 53 and 239 ms instead of 218 and
807 ms.

So ``make`` adds bytecode next to each source in those zips, once (``python -m
tidal.spark.cluster.pyzip``). The sources stay, so tracebacks still show them. The bytecode is
hash-based and unchecked (PEP 552): the zip is rewritten as a whole (a new file renamed into
place), so a source cannot change under its bytecode; a new PySpark wheel brings its own zip,
without bytecode, and the next ``make`` compiles it again. An interpreter of another Python
version finds a wrong magic number and falls back to the source, as ``zipimport`` does. Without
write access to the installed PySpark (a system site-packages) it says so and changes nothing.
On a cluster the workers' PySpark is the one on their own hosts: run the same command there.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import zipfile
from pathlib import Path

__all__ = ["compile_zip", "has_bytecode", "spark_python_zips"]

UNCHECKED_HASH = (0b01).to_bytes(4, "little")  # PEP 552 flags: hash-based, source not checked


def spark_python_zips() -> list[Path]:
    """The zips Spark puts on its Python workers' path: ``$SPARK_HOME/python/lib/*.zip``."""
    from tidal.spark.cluster.cds import spark_home

    return sorted((spark_home() / "python" / "lib").glob("*.zip"))


def _pyc(source: bytes, name: str) -> bytes:
    code = compile(source, name, "exec", dont_inherit=True)
    header = importlib.util.MAGIC_NUMBER + UNCHECKED_HASH + importlib.util.source_hash(source)
    return header + marshal.dumps(code)


def has_bytecode(path: Path) -> bool:
    """Whether the zip was compiled for this interpreter's Python version (or has no sources).
    :func:`compile_zip` writes all its bytecode at once, so one entry stands for all."""
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        if not any(n.endswith(".py") for n in names):
            return True
        compiled = next((n for n in names if n.endswith(".pyc")), None)
        if compiled is None:
            return False
        with archive.open(compiled) as pyc:
            return pyc.read(4) == importlib.util.MAGIC_NUMBER


def compile_zip(path: Path) -> int:
    """Rewrite the zip with bytecode beside each source; returns how many modules were compiled
    (0 when it already had this Python's bytecode). Stale bytecode of another Python is replaced.

    A source that does not compile (PySpark ships none, but a zip may) keeps no bytecode: its
    importer compiles it, or fails, just as before."""
    if has_bytecode(path):
        return 0
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    compiled = 0
    try:
        with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for info in src.infolist():
                if info.filename.endswith(".pyc"):
                    continue  # another Python's, or a partial earlier run's: compiled again below
                data = src.read(info)
                out.writestr(info, data)
                if not info.filename.endswith(".py"):
                    continue
                try:
                    pyc = _pyc(data, str(path / info.filename))
                except (SyntaxError, ValueError):
                    continue
                entry = zipfile.ZipInfo(f"{info.filename}c", date_time=info.date_time)
                entry.compress_type = zipfile.ZIP_DEFLATED
                out.writestr(entry, pyc)
                compiled += 1
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return compiled


def main() -> int:
    """``python -m tidal.spark.cluster.pyzip``: compile the zips that lack this Python's bytecode."""
    import warnings

    warnings.simplefilter("ignore", SyntaxWarning)  # PySpark's own tests have a few
    for path in spark_python_zips():
        try:
            compiled = compile_zip(path)
        except OSError as error:
            print(
                f"cannot add bytecode to {path} ({error.strerror or error}); Spark's Python "
                "workers will compile PySpark from source (~0.6 s each)",
                file=sys.stderr,
            )
            continue
        if compiled:
            print(f"compiled {compiled} modules into {path.name} for Spark's Python workers")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
