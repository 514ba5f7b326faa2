"""Bytecode in Spark's Python zips: compiled once, imported from the bytecode, sources and data
kept, stale bytecode of another Python replaced, a source that does not compile left as it was."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

from tidal.spark.cluster.pyzip import compile_zip, has_bytecode

FILES = {
    "pkg/__init__.py": b"",
    "pkg/mod.py": b"X = 41 + 1\n",
    "pkg/broken.py": b"def (:\n",
    "pkg/data.txt": b"not python",
}


def _zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def _import(path: Path, statement: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(path)!r}); {statement}"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return proc.stdout.strip()


def test_a_compiled_zip_is_imported_from_its_bytecode_and_keeps_everything_else(tmp_path: Path) -> None:
    path = _zip(tmp_path / "lib.zip", FILES)
    assert not has_bytecode(path)
    assert compile_zip(path) == 2  # __init__ and mod; broken has none
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert {n: archive.read(n) for n in FILES} == FILES  # sources and data as they were
    assert sorted(n for n in names if n.endswith(".pyc")) == ["pkg/__init__.pyc", "pkg/mod.pyc"]
    assert len(names) == len(set(names)) == 6
    assert has_bytecode(path)
    assert _import(path, "import pkg.mod; print(pkg.mod.X, pkg.mod.__file__)") == f"42 {path}/pkg/mod.pyc"


def test_compiling_again_leaves_the_file_alone(tmp_path: Path) -> None:
    path = _zip(tmp_path / "lib.zip", FILES)
    compile_zip(path)
    before = path.stat()
    assert compile_zip(path) == 0
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_another_pythons_bytecode_is_replaced(tmp_path: Path) -> None:
    stale = b"\x00\x00\r\n" + bytes(12) + b"stale"  # a magic number no Python uses
    path = _zip(tmp_path / "lib.zip", {**FILES, "pkg/mod.pyc": stale})
    assert not has_bytecode(path)
    assert compile_zip(path) == 2
    with zipfile.ZipFile(path) as archive:
        assert archive.namelist().count("pkg/mod.pyc") == 1
        assert archive.read("pkg/mod.pyc")[:4] == importlib.util.MAGIC_NUMBER
    assert _import(path, "import pkg.mod; print(pkg.mod.X)") == "42"


def test_a_zip_without_sources_needs_nothing(tmp_path: Path) -> None:
    path = _zip(tmp_path / "data.zip", {"a.txt": b"x"})
    assert has_bytecode(path)
    assert compile_zip(path) == 0
