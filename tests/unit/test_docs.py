"""The examples in the docs run: a doc that drifts from the code fails here."""

import doctest
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", ["scaling.md", "pipeline-spec.md", "testing.md"])
def test_doc_examples_run(name):
    result = doctest.testfile(str(DOCS / name), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.parametrize(
    "module",
    [
        "tidal.scaling",
        "tidal.scaling.windows",
        "tidal.scaling.rates",
        "tidal.scaling.numaflow",
        "tidal.spec.builder",
        "tidal.scaling.numaflow_scale",
        "tidal.testing",
    ],
)
def test_module_doctests(module):
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0


def test_the_http_source_example_is_a_valid_pipeline():
    from tidal.spec import parse_pipeline

    text = (DOCS / "http.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    import yaml

    spec = parse_pipeline(yaml.safe_load(block))
    assert spec.policy_of("in") == "kpa"


def test_the_monovertex_example_is_a_valid_monovertex():
    from tidal.spec import parse_pipeline

    text = (DOCS / "monovertex.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    import yaml

    spec = parse_pipeline(yaml.safe_load(block))
    assert [v.kind for v in spec.vertices] == ["monovertex"]


def test_the_architecture_page_names_only_modules_that_exist_and_every_room_of_the_runtime():
    """docs/architecture.md is the page a newcomer reads first: a room or module it names that is
    gone, or a room of the runtime (or a top-level package) it leaves out, fails here."""
    import importlib
    import pkgutil
    import re

    import tidal
    import tidal.spark

    text = (DOCS / "architecture.md").read_text()
    named = set(re.findall(r"`(tidal(?:\.[a-z_]+)+)", text))
    assert len(named) > 30
    for name in sorted(named):
        importlib.import_module(name)  # ModuleNotFoundError names what is gone
    rooms = {f"tidal.{m.name}" for m in pkgutil.iter_modules(tidal.__path__) if m.ispkg}
    rooms |= {f"tidal.spark.{m.name}" for m in pkgutil.iter_modules(tidal.spark.__path__) if m.ispkg}
    assert rooms <= named, f"rooms the page leaves out: {sorted(rooms - named)}"
