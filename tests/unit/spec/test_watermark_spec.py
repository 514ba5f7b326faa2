"""``watermark:`` (maxDelay, idleSource) in Tidal's spec and from a Numaflow manifest: durations as
Numaflow writes them, each mistake named with its field, ``disabled`` listed as not honoured."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tidal import errors
from tidal.spark.query.queries import idle_watch
from tidal.spec import Pipeline, manifest, parse_pipeline
from tidal.spec.chains import plan_chains

E2E = Path(__file__).parents[2] / "data" / "numaflow" / "e2e"


GROUP_BY = {"window": {"fixed": {"length": "10s"}}, "allowedLateness": "1s"}
THRESHOLD, INCREMENT = "watermark.idleSource.threshold", "watermark.idleSource.incrementBy"


def _spec(watermark: dict | None = None) -> dict:
    spec = {
        "name": "p",
        "vertices": [
            {"name": "in", "source": {"generator": {}}},
            {"name": "sum", "udf": {"reduce": "tidal.examples.numaflow:reduce_sum", "groupBy": GROUP_BY}},
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "in", "to": "sum"}, {"from": "sum", "to": "out"}],
    }  # fmt: skip
    if watermark is not None:
        spec["watermark"] = watermark
    return spec


def test_the_fields_read_as_numaflow_writes_them():
    spec = parse_pipeline(
        _spec(
            {
                "maxDelay": "20s",
                "idleSource": {"threshold": "5s", "incrementBy": "2s", "stepInterval": "500ms"},
            }
        )
    )
    idle = spec.watermark.idle_source
    assert (spec.watermark.max_delay, idle.threshold, idle.increment_by, idle.step_interval) == (
        20,
        5,
        2,
        0.5,
    )
    assert idle.init_source_delay is None
    assert parse_pipeline(_spec()).watermark.idle_source is None  # by default a quiet input holds


@pytest.mark.parametrize(
    ("watermark", "field"),
    [
        pytest.param({"idleSource": {"incrementBy": "2s"}}, THRESHOLD, id="no-threshold"),
        pytest.param({"idleSource": {"threshold": "5s"}}, INCREMENT, id="no-incrementBy"),
        pytest.param({"idleSource": {"threshold": "0s", "incrementBy": "1s"}}, THRESHOLD, id="zero"),
        pytest.param({"maxDelay": "soon"}, "watermark.maxDelay", id="not-a-duration"),
        pytest.param({"disabled": True}, "watermark.disabled", id="numaflows-disabled-is-no-tidal-field"),
    ],
)  # fmt: skip
def test_a_mistake_names_its_field(watermark, field):
    with pytest.raises(errors.SpecError) as caught:
        parse_pipeline(_spec(watermark))
    assert field in str(caught.value)


def test_the_builder_takes_the_same_fields():
    built = (
        Pipeline("p", watermark={"maxDelay": "1s", "idleSource": {"threshold": "2s", "incrementBy": "1s"}})
        .source("in", generator={})
        .reduce("sum", "tidal.examples.numaflow:reduce_sum", window={"fixed": {"length": "10s"}})
        .sink("out", "log")
        .chain("in", "sum", "out")
        .build()
    )
    assert (
        built.watermark
        == parse_pipeline(
            _spec({"maxDelay": "1s", "idleSource": {"threshold": "2s", "incrementBy": "1s"}})
        ).watermark
    )


SINK = {"sink": "tidal.examples.numaflow:log_sink"}  # its Redis sink: a log sink here


def test_numaflows_idle_source_e2e_converts_with_its_watermark_and_each_input_waits_for_its_sources():
    """numaproj/numaflow test/idle-source-e2e/testdata/idle-source-reduce-pipeline.yaml."""
    converted = manifest.convert(yaml.safe_load((E2E / "idle-source-reduce-pipeline.yaml").read_text()), SINK)
    assert not any("watermark" in line for line in converted.ignored)
    spec = parse_pipeline(converted.data)
    idle = spec.watermark.idle_source
    assert (spec.watermark.max_delay, idle.threshold, idle.increment_by, idle.step_interval) == (20, 5, 2, 2)
    assert idle.init_source_delay == 5
    watch = idle_watch(spec, plan_chains(spec), "compute-sum")
    assert watch is not None and watch.params is not None
    assert watch.span == 10 + 0 + 20  # window + allowedLateness + maxDelay
    (atoi,) = watch.inputs
    assert atoi.origin == "atoi"
    assert set(atoi.sources) == {"in", "in-two"}  # both sources, and atoi's own buffer, must be empty
    assert "atoi" in atoi.buffers


def test_numaflows_disabled_is_listed_as_not_honoured_and_false_is_not():
    base = yaml.safe_load((E2E / "idle-source-reduce-pipeline.yaml").read_text())
    base["spec"]["watermark"]["disabled"] = True
    assert any(line.startswith("spec.watermark.disabled") for line in manifest.convert(base, SINK).ignored)
    base["spec"]["watermark"]["disabled"] = False
    assert not any("watermark" in line for line in manifest.convert(base, SINK).ignored)


def test_a_join_into_a_reduce_has_a_watermark_per_input_even_without_idle_source():
    spec = _spec()
    spec["vertices"].insert(1, {"name": "in2", "source": {"generator": {}}})
    spec["edges"].append({"from": "in2", "to": "sum"})
    parsed = parse_pipeline(spec)
    watch = idle_watch(parsed, plan_chains(parsed), "sum")
    assert watch is not None and watch.params is None
    assert [u.origin for u in watch.inputs] == ["in", "in2"]
    assert idle_watch(parse_pipeline(_spec()), plan_chains(parse_pipeline(_spec())), "sum") is None
