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
