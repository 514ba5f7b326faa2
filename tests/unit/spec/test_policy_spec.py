"""`policy: kpa` in the spec, per vertex or per pipeline (issue #18: every policy the simulator
runs, `tidal run` runs too); on real Spark in tests/integration/test_policies.py."""

from __future__ import annotations

import pytest

from tidal import errors
from tidal.spec import parse_pipeline


def problem(data: dict) -> str:
    with pytest.raises(errors.SpecError) as info:
        parse_pipeline(data)
    return "\n".join(str(e) for e in (info.value, *info.value.others))


def kpa_pipeline(vertex: dict, top: dict | None = None) -> dict:
    return {
        "name": "p",
        **(top or {}),
        "vertices": [
            {"name": "in", "source": {"generator": {}}},
            {"name": "work", "udf": {"map": "tidal.examples.udfs:upper"}, **vertex},
            {"name": "out", "sink": {"log": {}}},
        ],
    }


def test_kpa_per_vertex_or_per_pipeline_with_knative_keys():
    from tidal.scaling import KpaMetric
    from tidal.spec.validate import kpa_spec

    spec = parse_pipeline(
        {**kpa_pipeline({"policy": "kpa", "kpa": {"target": 500, "window": "30s"}, "scale": {"max": 6}}),
         "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "out"}]}
    )  # fmt: skip
    assert spec.policy_of("work") == "kpa" and spec.policy_of("in") == "tidal"  # the default
    kpa = kpa_spec(spec.vertex("work"))
    assert kpa.metric == KpaMetric.RPS and kpa.target == 500
    assert kpa.stable_window == 30 and kpa.max_scale == 6
    top = parse_pipeline(
        {**kpa_pipeline({"kpa": {"target": 100}}, {"policy": "kpa"}),
         "vertices": [{"name": "in", "source": {"generator": {}}, "policy": "numaflow"},
                      {"name": "work", "udf": {"map": "tidal.examples.udfs:upper"}, "kpa": {"target": 100}},
                      {"name": "out", "sink": {"log": {}}, "kpa": {"target": 900}}],
         "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "out"}]}
    )  # fmt: skip
    assert [top.policy_of(n) for n in ("in", "work", "out")] == ["numaflow", "kpa", "kpa"]


@pytest.mark.parametrize(
    ("vertex", "words"),
    [
        ({"policy": "kpa"}, "vertices[1].kpa.target: is required with policy: kpa"),
        ({"policy": "kpa", "kpa": {"target": 10, "metric": "concurrency"}}, "kpa.metric"),
        ({"policy": "kpa", "kpa": {"target": 10, "window": "soon"}}, "vertices[1].kpa.window"),
        ({"policy": "kpa", "kpa": {"target": 10, "stable-window": 1}}, "kpa.stable-window"),
        ({"kpa": {"target": 10}}, "vertices[1].kpa: is read only with policy: kpa"),
        ({"policy": "hpa"}, "policy"),
    ],
)
def test_bad_kpa_settings_name_the_field(vertex, words):
    data = {**kpa_pipeline(vertex), "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "out"}]}
    assert words in problem(data)


def test_the_policies_bench_can_leave_numaflow_its_defaults(tmp_path) -> None:
    """`tidal bench policies-defaults` runs the demo's waves with Numaflow's own windows and
    cooldowns: the scale blocks keep `min` and `max` only, and the spec resolves the rest to
    Numaflow's defaults (lookback 120 s, cooldowns 90 s, target 20 s)."""
    from tidal.bench.policies import wave_spec
    from tidal.spec import load_pipeline, numaflow_scale

    tuned = load_pipeline(wave_spec(tmp_path, "numaflow"))
    spec = load_pipeline(wave_spec(tmp_path, "numaflow", numaflow_defaults=True))
    enrich = next(v for v in spec.vertices if v.name == "enrich")
    scale = numaflow_scale(enrich.scale)
    assert (scale.min, scale.max) == (0, 6)
    assert (scale.lookback_seconds, scale.scale_up_cooldown_seconds) == (120, 90)
    assert (scale.scale_down_cooldown_seconds, scale.target_processing_seconds) == (90, 20)
    assert numaflow_scale(next(v for v in tuned.vertices if v.name == "enrich").scale).lookback_seconds == 10
    assert spec.policy == "numaflow" and [v.name for v in spec.vertices] == ["orders", "enrich", "archive"]
