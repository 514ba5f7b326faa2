"""Side inputs in the spec and in Numaflow manifests (tidal.spec.side_inputs, manifest_side_inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tidal import errors
from tidal.spec import load_pipeline, manifest, parse_pipeline

DATA = Path(__file__).parents[2] / "data" / "numaflow" / "sideinput"
RETRIEVER = "tidal.examples.numaflow_side_inputs:EvenOddTicker"


def pipeline(side_inputs=None, reads=("myticker",), udf=None) -> dict:
    return {
        "name": "si",
        "sideInputs": side_inputs
        if side_inputs is not None
        else [{"name": "myticker", "pynumaflow": RETRIEVER, "trigger": {"schedule": "@every 5s"}}],
        "vertices": [
            {"name": "in", "source": {"generator": {"rate": 1}}},
            {
                "name": "map",
                "udf": udf or {"pynumaflow": "tidal.examples.numaflow_side_inputs:map_side_input"},
                "sideInputs": list(reads),
            },
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "in", "to": "map"}, {"from": "map", "to": "out"}],
    }


def test_a_pipeline_with_side_inputs_parses_and_its_vertices_name_them():
    spec = parse_pipeline(pipeline())
    assert [s.name for s in spec.side_inputs] == ["myticker"]
    assert spec.side_inputs[0].trigger.schedule == "@every 5s"
    assert spec.vertex("map").side_inputs == ["myticker"]
    assert spec.vertex("out").side_inputs == []


@pytest.mark.parametrize(
    ("data", "path", "says"),
    [
        (pipeline(reads=("mytickr",)), "vertices[1].sideInputs[0]", "side input 'mytickr' is not defined"),
        (pipeline(reads=("myticker", "myticker")), "vertices[1].sideInputs[1]", "named twice"),
        (
            pipeline(
                side_inputs=[
                    {"name": "myticker", "pynumaflow": RETRIEVER, "trigger": {"schedule": "@every 5s"}},
                    {"name": "myticker", "pynumaflow": RETRIEVER, "trigger": {"schedule": "@every 9s"}},
                ]
            ),
            "sideInputs[1].name",
            "defined more than once",
        ),
        (
            pipeline(
                side_inputs=[
                    {"name": "myticker", "pynumaflow": RETRIEVER, "trigger": {"schedule": "0 9 * * *"}}
                ]
            ),
            "sideInputs[0].trigger.schedule",
            "has 5 fields",
        ),
        (
            pipeline(
                side_inputs=[
                    {
                        "name": "myticker",
                        "pynumaflow": RETRIEVER,
                        "trigger": {"schedule": "@every 5s", "timezone": "Mars/Olympus"},
                    }
                ]
            ),
            "sideInputs[0].trigger.timezone",
            "is not a timezone",
        ),
        (pipeline(reads=()), "sideInputs[0]", "read by no vertex"),
        (
            pipeline(udf={"map": "tidal.examples.udfs:upper"}),
            "vertices[1].sideInputs",
            "cannot read side inputs",
        ),
    ],
)
def test_each_mistake_is_refused_naming_the_field_and_the_fix(data, path, says):
    with pytest.raises(errors.SpecError) as err:
        parse_pipeline(data)
    found = [err.value, *err.value.others]
    matching = [e for e in found if e.path == path]
    assert matching, [e.path for e in found]
    assert says in matching[0].problem
    assert matching[0].fix


def test_a_source_cannot_read_side_inputs():
    data = pipeline()
    data["vertices"][0]["sideInputs"] = ["myticker"]
    with pytest.raises(errors.SpecError) as err:
        parse_pipeline(data)
    assert err.value.path == "vertices[0].sideInputs"


REDUCER = "tidal.examples.numaflow_side_inputs:SideInputReducer"


@pytest.mark.parametrize(
    "window",
    [
        pytest.param({"fixed": {"length": "1s"}}, id="fixed"),
        pytest.param({"sliding": {"length": "2s", "slide": "1s"}}, id="sliding"),
        pytest.param({"session": {"timeout": "1s"}}, id="session"),
        pytest.param({"accumulator": {"timeout": "1s"}}, id="accumulator"),
    ],
)
def test_a_reduce_vertex_reads_side_inputs_as_numaflows_do(window):
    spec = parse_pipeline(pipeline(udf={"reduce": REDUCER, "groupBy": {"window": window}}))
    assert spec.vertex("map").side_inputs == ["myticker"]


def test_a_sql_step_still_cannot_read_side_inputs():
    with pytest.raises(errors.SpecError) as err:
        parse_pipeline(pipeline(udf={"sql": "SELECT * FROM input"}))
    found = [err.value, *err.value.others]
    refused = [e for e in found if e.path == "vertices[1].sideInputs"]
    assert refused and "a reduce" in refused[0].fix


def test_a_numaflow_reduce_vertex_keeps_its_side_inputs_when_converted():
    raw = yaml.safe_load((DATA / "simple_sideinput" / "pipeline.yaml").read_text())
    udf = next(v for v in raw["spec"]["vertices"] if v.get("sideInputs"))
    udf["udf"] = {"container": {"image": "my/reducer:v1"}, "groupBy": {"window": {"fixed": {"length": "5s"}}}}
    spec = parse_pipeline(manifest.convert(raw, {"my/reducer": REDUCER}).data)
    reduce = next(v for v in spec.vertices if v.side_inputs)
    assert reduce.udf is not None and reduce.udf.reduce == REDUCER
    assert reduce.side_inputs == ["myticker"]


def test_numaflows_simple_sideinput_example_converts_to_its_tidal_handlers():
    data = yaml.safe_load((DATA / "simple_sideinput" / "pipeline.yaml").read_text())
    converted = manifest.convert(data)
    assert converted.data["sideInputs"] == [
        {
            "name": "myticker",
            "pynumaflow": "tidal.examples.numaflow_side_inputs:ExampleSideInput",
            "trigger": {"schedule": "0 */2 * * * *"},
        }
    ]
    si_log = converted.data["vertices"][1]
    assert si_log["sideInputs"] == ["myticker"]
    assert si_log["udf"] == {"pynumaflow": "tidal.examples.numaflow_side_inputs:SideInputHandler"}
    spec = parse_pipeline(converted.data)
    assert spec.vertex("si-log").side_inputs == ["myticker"]


def test_the_map_sideinput_e2e_converts_with_a_handlers_file_for_its_sink(tmp_path):
    source = DATA / "e2e" / "map-sideinput-pipeline.yaml"
    handlers = {"sink": "tidal.examples.numaflow:log_sink"}  # the e2e's redis sink: a log sink here
    spec = load_pipeline(source, handlers)
    assert spec.side_inputs[0].trigger.schedule == "*/5 * * * * *"
    assert spec.side_inputs[0].pynumaflow == "tidal.examples.numaflow_side_inputs:EvenOddTicker"
    assert spec.vertex("si-e2e").side_inputs == ["myticker"]


def test_a_retriever_image_is_named_by_the_side_inputs_name_in_a_handlers_file():
    data = yaml.safe_load((DATA / "simple_sideinput" / "pipeline.yaml").read_text())
    data["spec"]["sideInputs"][0]["container"]["image"] = "my-registry.io/team/ticker:v1"
    data["spec"]["sideInputs"][0]["container"]["env"] = [{"name": "A", "value": "1"}]
    with pytest.raises(errors.SpecError) as err:
        manifest.convert(data)
    assert err.value.path == "spec.sideInputs[0].container.image"
    assert "side input retriever" in err.value.problem
    converted = manifest.convert(data, {"myticker": "mymodule:Ticker"})
    assert converted.data["sideInputs"][0]["pynumaflow"] == "mymodule:Ticker"
    assert any(line.startswith("spec.sideInputs[0].container.env") for line in converted.ignored)


def test_a_side_input_without_a_trigger_is_refused():
    data = yaml.safe_load((DATA / "simple_sideinput" / "pipeline.yaml").read_text())
    del data["spec"]["sideInputs"][0]["trigger"]
    with pytest.raises(errors.SpecError) as err:
        manifest.convert(data)
    assert err.value.path == "spec.sideInputs[0].trigger.schedule"


def test_the_python_builder_gives_the_same_spec_as_the_yaml():
    from tidal.spec import Pipeline

    spec = (
        Pipeline("si")
        .side_input("myticker", RETRIEVER, "@every 5s")
        .source("in", generator={"rate": 1})
        .pynumaflow("map", "tidal.examples.numaflow_side_inputs:map_side_input", side_inputs=["myticker"])
        .sink("out", "pynumaflow", handler="tidal.examples.numaflow:log_sink", side_inputs=["myticker"])
        .build()
    )
    yaml_spec = parse_pipeline(pipeline())
    assert spec.side_inputs == yaml_spec.side_inputs
    assert spec.vertex("map").side_inputs == ["myticker"] == spec.vertex("out").side_inputs
