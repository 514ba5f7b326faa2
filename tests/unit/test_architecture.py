"""The layer rules that make the scaling core reusable: checked on the source, not by review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tidal
import tidal.scaling

SRC = Path(tidal.__file__).parent
SCALING = sorted((SRC / "scaling").glob("*.py"))

BANNED_MODULES = {
    "os", "sys", "time", "threading", "asyncio", "subprocess", "socket", "sqlite3", "random",
    "pyspark", "nats", "io", "pathlib", "logging", "zoneinfo", "multiprocessing", "signal",
}  # fmt: skip
BANNED_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter", "open", "sleep"}


@pytest.mark.parametrize("path", SCALING, ids=lambda p: p.name)
def test_scaling_imports_nothing_impure(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0]]
        else:
            continue
        assert not set(names) & BANNED_MODULES, f"{path.name}:{node.lineno} imports {names}"


@pytest.mark.parametrize("path", SCALING, ids=lambda p: p.name)
def test_scaling_reads_no_clock_and_opens_nothing(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            assert name not in BANNED_CALLS, f"{path.name}:{node.lineno} calls {name}()"


def test_root_exports_are_pinned():
    assert sorted(tidal.__all__) == sorted(
        [
            "BufferError", "BufferFull", "BufferNotFound", "BufferUnavailable", "Decision", "KpaSpec",
            "Message", "MessageTooLarge", "NumaflowScale", "PipelineError", "Rule", "SourceError",
            "SpecError", "TidalError", "UdfError", "VertexKind", "__version__",
        ]
    )  # fmt: skip
    for name in tidal.__all__:
        assert hasattr(tidal, name)


def test_scaling_exports_exist():
    for name in tidal.scaling.__all__:
        assert hasattr(tidal.scaling, name), name


def test_the_error_tree_is_drawn_the_same_in_the_code_and_the_docs():
    import inspect
    import re

    import tidal.errors

    def tree(text: str) -> list[tuple[int, str]]:
        drawn = re.findall(r"^(\s*(?:[│ ]*[├└]── )?)([A-Z][A-Za-z]+)\s{2,}", text, re.M)
        return [(len(prefix.strip(" ")), name) for prefix, name in drawn]

    in_code = tree(tidal.errors.__doc__ or "")
    in_docs = tree((SRC.parent.parent / "docs" / "errors.md").read_text().split("```")[1])
    assert in_code == in_docs
    classes = {
        n
        for n, c in inspect.getmembers(tidal.errors, inspect.isclass)
        if issubclass(c, tidal.errors.TidalError)
    }
    exported = {n for n in tidal.errors.__all__ if isinstance(getattr(tidal.errors, n), type)}
    assert {name for _, name in in_code} == classes == exported


def test_only_the_controller_writes_a_vertexs_replica_count():
    """One writer (tidal.controller.replicas): the autoscaler's decisions, a person's writes and the
    first start's seed all go through the controller package. The test rigs and the benchmarks,
    which play the controller's part, are the exceptions."""
    allowed = ("controller/", "isb/", "testing.py", "bench/")
    writers = []
    for path in sorted(SRC.rglob("*.py")):
        where = path.relative_to(SRC).as_posix()
        if where.startswith(allowed):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Attribute) and func.attr == "set_replicas":
                writers.append(f"{where}:{node.lineno}")
    assert writers == [], f"replica counts written outside tidal.controller: {writers}"
