"""The pipeline spec: YAML and builder give the same model; every bad input names its path and fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tidal import errors
from tidal.scaling import NumaflowScale
from tidal.spec import Pipeline, load_pipeline, numaflow_scale, parse_pipeline, resolve
from tidal.spec.graph import topological

GOOD = textwrap.dedent(
    """
    name: demo
    limits: {bufferMaxLength: 10000, bufferUsageLimit: 0.7, readBatchSize: 200}
    vertices:
      - name: in
        source:
          generator: {rate: 100, shape: step, peak: 1000, at: 30, msgSize: 64}
        scale: {min: 1, max: 4}
      - name: upper
        udf: {map: "tidal.examples.udfs:upper", retries: 1}
        scale: {targetProcessingSeconds: 3, scaleUpCooldownSeconds: 10}
      - name: out
        sink: {file: {path: out.jsonl}}
    edges:
      - {from: in, to: upper}
      - {from: upper, to: out}
    """
)


def problems(text: str) -> list[str]:
    with pytest.raises(errors.SpecError) as info:
        load_pipeline(text)
    err = info.value
    return [str(e).split("\n")[0] for e in (err, *err.others)]


def vertex_yaml(body: str, sink: str = "sink: {log: {}}") -> str:
    return textwrap.dedent(
        f"""
        name: demo
        vertices:
          - name: in
            source: {{generator: {{rate: 10}}}}
          - {{name: mid, {body}}}
          - name: out
            {sink}
        edges: [{{from: in, to: mid}}, {{from: mid, to: out}}]
        """
    )


def test_good_yaml_loads_with_numaflow_names():
    spec = load_pipeline(GOOD)
    assert spec.limits.buffer_max_length == 10000
    assert spec.limits.read_batch_size == 200
    upper = spec.vertex("upper")
    assert upper.kind == "udf" and upper.udf is not None
    assert upper.udf.kind == "map" and upper.udf.retries == 1
    assert upper.scale.target_processing_seconds == 3
    assert spec.vertex("in").source.generator.peak == 1000
    assert spec.inputs("upper") == ["in"] and spec.outputs("upper") == ["out"]


def test_defaults_are_numaflows():
    spec = load_pipeline(GOOD)
    scale = numaflow_scale(spec.vertex("out").scale)
    assert scale == NumaflowScale()
    assert spec.controller.interval_seconds == 1.0
    assert spec.buffers.backend == "sqlite"


def test_file_and_text_load_the_same(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(GOOD)
    assert load_pipeline(path) == load_pipeline(GOOD) == load_pipeline(str(path))


def test_builder_gives_the_same_model_as_yaml():
    built = (
        Pipeline("demo", limits={"bufferMaxLength": 10000, "bufferUsageLimit": 0.7, "readBatchSize": 200})
        .source(
            "in",
            generator={"rate": 100, "shape": "step", "peak": 1000, "at": 30, "msgSize": 64},
            scale={"min": 1, "max": 4},
        )
        .map(
            "upper",
            "tidal.examples.udfs:upper",
            retries=1,
            scale={"targetProcessingSeconds": 3, "scaleUpCooldownSeconds": 10},
        )
        .sink("out", "file", path="out.jsonl")
        .build()
    )
    assert built == load_pipeline(GOOD)


def test_builder_accepts_callables():
    def shout(payload: bytes) -> bytes:
        return payload.upper()

    spec = Pipeline("p").source("in", generator={"rate": 1}).map("m", shout).sink("out").build()
    assert spec.vertex("m").udf.function is shout


def test_unknown_key_suggests_the_closest():
    assert problems(vertex_yaml("udf: {map: 'tidal.examples.udfs:upper'}, scale: {scaleUpCooldown: 3}")) == [
        "vertices[1].scale.scaleUpCooldown: unknown key 'scaleUpCooldown' "
        "(did you mean 'scaleUpCooldownSeconds'?)"
    ]


def test_unknown_top_level_key():
    text = GOOD.replace("limits:", "limit:")
    assert problems(text)[0] == "limit: unknown key 'limit' (did you mean 'limits'?)"


def test_scale_errors_carry_the_vertex_path():
    msgs = problems(vertex_yaml("udf: {map: 'tidal.examples.udfs:upper'}, scale: {min: 3, max: 1}"))
    assert msgs == ["vertices[1].scale.max: 1 is below min 3 (raise max or lower min)"]


def test_wrong_type_names_the_field():
    msgs = problems(GOOD.replace("readBatchSize: 200", "readBatchSize: lots"))
    assert msgs[0].startswith("limits.readBatchSize: 'lots'")


def test_out_of_range_limit():
    msgs = problems(GOOD.replace("bufferUsageLimit: 0.7", "bufferUsageLimit: 1.5"))
    assert msgs[0].startswith("limits.bufferUsageLimit: 1.5")


def test_vertex_needs_exactly_one_kind():
    msgs = problems(vertex_yaml("udf: {map: 'tidal.examples.udfs:upper'}, sink: {log: {}}"))
    assert msgs[0].startswith("vertices[1]: a vertex needs exactly one of source, udf, sink")


def test_udf_needs_exactly_one_function():
    msgs = problems(vertex_yaml("udf: {map: 'a:b', filter: 'c:d'}"))
    assert msgs[0].startswith("vertices[1].udf: a udf needs exactly one of map, flatmap, filter")


def test_bad_vertex_name():
    msgs = problems(GOOD.replace("name: upper", "name: Upper_Case").replace("to: upper", "to: Upper_Case"))
    assert msgs[0].startswith("vertices[1].name: 'Upper_Case'")


def test_duplicate_names():
    text = GOOD.replace("name: out", "name: upper")
    assert (
        "vertices[2].name: 'upper' is already the name of vertices[1] (give every vertex its own name)"
        in problems(text)
    )


def test_edge_to_unknown_vertex_suggests_a_name():
    msgs = problems(GOOD.replace("{from: upper, to: out}", "{from: upper, to: ot}"))
    assert msgs[0] == "edges[1].to: no vertex named 'ot' (did you mean 'out'?)"


def test_a_cycle_without_conditions_is_named():
    text = GOOD.replace("edges:\n", "edges:\n  - {from: upper, to: upper}\n")
    assert (
        "edges: cycle upper → upper has no edge with conditions: every message would go round forever "
        "(put conditions on one edge of the cycle (a retry loop, as Numaflow's examples), or remove it)"
    ) in problems(text)


def test_a_retry_loop_through_a_conditional_edge_is_a_pipeline_and_a_loop_off_the_path_is_not():
    loop = "edges:\n  - {from: upper, to: upper, conditions: {tags: {values: [retry]}}}\n"
    spec = load_pipeline(GOOD.replace("edges:\n", loop))
    assert [v.name for v in topological(spec)] == ["in", "upper", "out"]
    stray = (
        "  - name: a\n    udf: {map: tidal.examples.udfs:upper}\n"
        "  - name: b\n    udf: {map: tidal.examples.udfs:upper}\n"
        "edges:\n  - {from: a, to: b}\n  - {from: b, to: a, conditions: {tags: {values: [x]}}}\n"
        "  - {from: b, to: out}\n"
    )
    msgs = problems(GOOD.replace("edges:\n", stray))
    assert any("udf 'a' cannot be reached from a source" in m for m in msgs)


def test_duplicate_edge():
    text = GOOD.replace("edges:\n", "edges:\n  - {from: in, to: upper}\n")
    assert problems(text)[0] == "edges[1]: repeats edges[0] (in → upper) (remove one)"


def test_edges_into_a_source_or_out_of_a_sink():
    text = GOOD.replace("edges:\n", "edges:\n  - {from: out, to: in}\n")
    msgs = problems(text)
    assert "edges[0].to: 'in' is a source: sources have no inputs (point the edge at a udf or sink)" in msgs
    assert "edges[0].from: 'out' is a sink: sinks have no outputs (start the edge at a source or udf)" in msgs


def test_vertex_cut_off_from_every_source():
    text = GOOD.replace("  - {from: in, to: upper}\n", "")
    msgs = problems(text)
    assert any(m.startswith("vertices[1]: udf 'upper' has no input edge") for m in msgs)
    assert any(m.startswith("vertices[0]: source 'in' has no output edge") for m in msgs)


def test_no_source():
    text = textwrap.dedent(
        """
        name: demo
        vertices:
          - {name: out, sink: {log: {}}}
        """
    )
    assert "vertices: no source vertex (add a vertex with source: (generator or user))" in problems(text)


def test_function_that_does_not_import():
    msgs = problems(vertex_yaml("udf: {map: 'no_such_module_xyz:f'}"))
    assert msgs[0].startswith("vertices[1].udf.map: cannot import 'no_such_module_xyz' (ModuleNotFoundError")


def test_function_name_typo_suggests_the_closest():
    msgs = problems(vertex_yaml("udf: {map: 'tidal.examples.udfs:uper'}"))
    assert msgs == [
        "vertices[1].udf.map: module 'tidal.examples.udfs' has no 'uper' "
        "(did you mean tidal.examples.udfs:upper?)"
    ]


def test_reference_without_colon():
    msgs = problems(vertex_yaml("udf: {map: 'tidal.examples.udfs.upper'}"))
    assert msgs[0].startswith("vertices[1].udf.map: 'tidal.examples.udfs.upper' is not module:function")


def test_user_class_must_be_a_class():
    udf = "udf: {map: 'tidal.examples.udfs:upper'}"
    msgs = problems(vertex_yaml(udf, sink="sink: {user: {class: 'tidal.examples.udfs:upper'}}"))
    assert msgs[0].startswith("vertices[2].sink.user.class: 'tidal.examples.udfs:upper' is not a class")


def test_file_sink_needs_a_path():
    msgs = problems(
        vertex_yaml("udf: {map: 'tidal.examples.udfs:upper'}").replace("sink: {log: {}}", "sink: {file: {}}")
    )
    assert msgs[0].startswith("vertices[2].sink: file sink needs path")


def test_cron_is_checked_with_its_path():
    text = GOOD.replace(
        "scale: {min: 1, max: 4}",
        "scale: {min: 1, max: 4, cron: {timezone: Mars/Olympus, "
        "schedules: [{start: '0 0 9 * * *', end: '0 0 17 * * *', max: 2}]}}",
    )
    assert problems(text)[0].startswith("vertices[0].scale.cron.timezone: unknown time zone 'Mars/Olympus'")


def test_cron_window_outside_base_bounds_is_accepted_with_what_takes_effect(caplog):
    """Upstream accepts it; its controller clamps the replicas to the base bounds (#3632)."""
    text = GOOD.replace(
        "scale: {min: 1, max: 4}",
        "scale: {min: 1, max: 4, cron: {schedules: "
        "[{start: '0 0 9 * * *', end: '0 0 17 * * *', min: 2, max: 9}]}}",
    )
    spec = load_pipeline(text)
    with caplog.at_level("WARNING", logger="tidal.spec"):
        scale = numaflow_scale(spec.vertices[0].scale, "vertices[0]")
    assert scale.cron is not None
    window = scale.cron.schedules[0]
    assert (window.min, window.max) == (2, 4)


def test_negative_min_is_refused_for_a_pipeline_vertex_as_numaflows_validator_does():
    text = GOOD.replace("scale: {min: 1, max: 4}", "scale: {min: -1, max: 4}")
    assert problems(text)[0].startswith("vertices[0].scale.min: -1 is negative")


def test_negative_min_reads_as_zero_in_numaflows_getter():
    from tidal.scaling import normalise_scale

    scale, notices = normalise_scale({"min": -2, "max": 3})
    assert (scale.min, scale.max) == (0, 3)
    assert notices == ["scale.min: -2 is negative: read as 0, as Numaflow's GetMinReplicas does"]


def test_invalid_yaml_names_the_line():
    assert problems("name: x\n vertices: [")[0].startswith("line 2, column 10: not valid YAML")


def test_yaml_that_is_not_a_mapping():
    assert problems("- a\n- b\n")[0].startswith("a pipeline is a mapping")


def test_missing_file():
    with pytest.raises(errors.SpecError, match="cannot read the pipeline file"):
        load_pipeline("/nonexistent/pipeline.yaml")


def test_missing_required_field():
    assert problems("name: demo\n")[0] == "vertices: is required (add it)"


def test_all_problems_reported_together():
    text = GOOD.replace("maxx", "").replace("scale: {min: 1, max: 4}", "scale: {min: 5, max: 4}")
    text = text.replace("{from: upper, to: out}", "{from: upper, to: nowhere}")
    msgs = problems(text)
    assert len(msgs) >= 3  # bad edge, the sink without input, the scale bounds


def test_parse_rechecks_a_model():
    spec = load_pipeline(GOOD)
    assert parse_pipeline(spec) is spec


def test_resolve_passes_callables_through():
    assert resolve(len, "x") is len
    from tidal.examples.udfs import upper

    assert resolve("tidal.examples.udfs:upper", "x") is upper


@pytest.mark.parametrize(
    "path", sorted(Path(__file__).parents[3].joinpath("src", "tidal", "examples").glob("*.yaml"))
)
def test_every_example_pipeline_is_valid(path):
    spec = load_pipeline(path)
    assert spec.name == path.stem and spec.edges


def test_trigger_seconds_is_a_limit_with_a_quarter_second_default_and_bounds():
    base = {
        "name": "p",
        "vertices": [{"name": "in", "source": {"generator": {}}}, {"name": "out", "sink": {"log": {}}}],
        "edges": [{"from": "in", "to": "out"}],
    }
    assert parse_pipeline(base).limits.trigger_seconds == 0.25
    assert parse_pipeline({**base, "limits": {"triggerSeconds": 1}}).limits.trigger_seconds == 1.0
    with pytest.raises(errors.SpecError) as caught:
        parse_pipeline({**base, "limits": {"triggerSeconds": 0.01}})
    assert caught.value.path == "limits.triggerSeconds"
