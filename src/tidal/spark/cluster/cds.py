"""Class-data sharing for Spark's JVMs: the classes a Spark session loads, parsed once and mapped.

A Spark JVM loads some 16,000 classes before it runs anything, and parsing and verifying them is
most of its start: measured on the 2-core box, a local session started in 4.9 s and ran its first
job in 2.2 s; with an archive of those classes (JDK's dynamic AppCDS, ``-XX:SharedArchiveFile``)
2.9 s and 1.2 s. The same archive serves an executor started by a standalone worker on this
machine (same Spark jars, same class path), whose JVM start is part of the 11 s between asking
for an executor and its first task (``tidal bench cluster``, docs/benchmarks.md).

The archive belongs to one JDK and one Spark: its name carries a key of the ``java`` that Spark
launches, the PySpark version and the jars' names and sizes, and a session uses only the
archive whose key matches (a JDK given an archive of another silently ignores it, but prints
warnings). ``make venv``'s targets build it once into the virtualenv (``python -m
tidal.spark.cluster.cds``, ~20 s); without it, everything works as before. ``TIDAL_CDS=0`` turns it off.

The archive is written by the JVM as it exits (``-XX:ArchiveClassesAtExit``) into a temporary
name, renamed into place only once that JVM has exited, so a session never maps a half-written
archive.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

__all__ = ["archive_path", "build", "driver_options", "executor_options", "spark_home"]

QUIET = "-Xlog:cds*=off"  # the archive's notes (signed jars skipped, …) would reach the console


def spark_home() -> Path:
    """The Spark that PySpark launches (``SPARK_HOME``, or the pip package's own)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return os.path.realpath(found) if found else "java"


def key() -> str:
    """What the archive was made for: the JDK, the PySpark version, the Spark jars."""
    import pyspark

    jars = spark_home() / "jars"
    listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar")) if jars.is_dir() else []
    digest = hashlib.sha256("\n".join([_java(), pyspark.__version__, *listing]).encode()).hexdigest()
    return f"{pyspark.__version__}-{digest[:12]}"


def archive_path(root: Path | None = None) -> Path:
    """Where this JDK's and this Spark's archive lives (in the virtualenv unless ``root``)."""
    base = root if root is not None else Path(sys.prefix) / "share" / "tidal" / "cds"
    return base / f"spark-{key()}.jsa"


def _usable(root: Path | None) -> Path | None:
    if os.environ.get("TIDAL_CDS", "1") == "0":
        return None
    path = archive_path(root)
    return path if path.is_file() else None


def driver_options(root: Path | None = None) -> str:
    """Java options for the driver: map the archive if there is one, else nothing."""
    path = _usable(root)
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path is not None else ""


def executor_options(master: str, root: Path | None = None) -> str:
    """Java options for executors: the archive, when the workers run on this machine (their
    Spark is this one, with the same class path); a remote worker has no such file."""
    from tidal.spark.cluster.standalone import master_address

    host, _ = master_address(master)
    if host not in {"127.0.0.1", "localhost", "::1"}:
        return ""
    return driver_options(root)


def build(root: Path | None = None) -> Path:
    """Run a small Spark session that does what a pipeline does (a streaming query, Arrow batches
    to Python and back, a DataFrame job), and keep the classes it loaded as the archive."""
    from pyspark.sql import SparkSession

    from tidal.spark.cluster.interpreter import spark_python

    path = archive_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    spark_python()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tidal-cds")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config(
            "spark.driver.extraJavaOptions", f"-Dlog4j2.level=ERROR -XX:ArchiveClassesAtExit={tmp} {QUIET}"
        )
        .getOrCreate()
    )
    try:
        spark.sparkContext.setLogLevel("ERROR")
        _exercise(spark, path.parent)
    finally:
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        spark.stop()
        proc = getattr(gateway, "proc", None)
        if gateway is not None and proc is not None:  # the JVM writes the archive as it exits: wait
            gateway.shutdown()
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=300)
    if not tmp.is_file() or tmp.stat().st_size == 0:
        raise RuntimeError(f"the JVM wrote no class-data archive at {tmp}")
    os.replace(tmp, path)
    return path


def _exercise(spark: object, scratch: Path) -> None:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    df = spark.range(10_000).selectExpr("id", "cast(id as string) as value")
    df.mapInArrow(lambda batches: batches, df.schema).groupBy().count().collect()
    checkpoint = scratch / f"cds-checkpoint-{os.getpid()}"
    try:
        query = (
            spark.readStream.format("rate").option("rowsPerSecond", 100).load()
            .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds").start()
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if query.lastProgress is not None and query.lastProgress["batchId"] >= 2:
                break
            time.sleep(0.2)
        query.stop()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def main() -> int:
    """``python -m tidal.spark.cluster.cds``: build the archive unless this JDK's and Spark's exists."""
    path = archive_path()
    if path.is_file():
        print(f"class-data archive up to date: {path}")
        return 0
    print(f"building the class-data archive for Spark's JVMs ({path.name}, ~20 s) …", flush=True)
    print(f"wrote {build()} ({path.stat().st_size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
