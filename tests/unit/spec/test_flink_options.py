"""``controller.flink``: ``policy: flink`` tuned with Flink's own ``job.autoscaler.*`` keys, and
a wrong key or value refused at load with the fix (tidal.spec.flink)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal import errors
from tidal.controller.choose import spec_policies
from tidal.controller.flink import FlinkPolicy
from tidal.scaling.flink import FlinkOptions
from tidal.scaling.flink_align import AlignmentMode
from tidal.spec import parse_pipeline
from tidal.spec.flink import KEYS, PREFIX, flink_options


def pipeline(flink: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "p",
        "policy": "flink",
        "controller": {"flink": flink},
        "vertices": [
            {"name": "in", "source": {"generator": {}}},
            {"name": "work", "udf": {"map": "tidal.examples.udfs:upper"}},
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "out"}],
    }


def problem(data: dict[str, Any]) -> str:
    with pytest.raises(errors.SpecError) as info:
        parse_pipeline(data)
    return "\n".join(str(e) for e in (info.value, *info.value.others))


def test_flinks_keys_reach_the_job_that_runs() -> None:
    spec = parse_pipeline(pipeline({
        "job.autoscaler.utilization.target": 0.5,
        "job.autoscaler.metrics.window": "30 s",
        "catch-up.duration": "1 min",  # the prefix is optional
        "job.autoscaler.scaling.parallelism-alignment.mode": "off",
        "job.autoscaler.restart.time-tracking.enabled": False,
    }))  # fmt: skip
    policies = spec_policies(spec, 0.0, lambda _: 1)  # what `tidal run` builds
    jobs = {id(p.job) for p in policies.values() if isinstance(p, FlinkPolicy)}
    assert len(jobs) == 1
    options = next(p for p in policies.values() if isinstance(p, FlinkPolicy)).job.options
    assert (options.utilization_target, options.metrics_window, options.catch_up_duration) == (
        0.5,
        30.0,
        60.0,
    )
    assert options.scaling_parallelism_alignment_mode is AlignmentMode.OFF
    assert options.restart_time_tracking_enabled is False
    assert options.stabilization_interval == FlinkOptions().stabilization_interval  # not given: Tidal's


def test_no_keys_is_tidals_defaults_and_deprecated_keys_are_read_as_flink_reads_them() -> None:
    assert parse_pipeline(pipeline({})).controller.flink_options() == FlinkOptions()
    old = flink_options(
        {"job.autoscaler.target.utilization": 0.6, "job.autoscaler.scale-up.grace-period": "2m"}
    )
    assert (old.utilization_target, old.scale_down_interval) == (0.6, 120.0)


def test_every_option_has_its_flink_key() -> None:
    assert set(KEYS) == {f.name for f in dataclasses.fields(FlinkOptions)}
    assert len(set(KEYS.values())) == len(KEYS)


@pytest.mark.parametrize(
    ("flink", "said"),
    [
        ({"job.autoscaler.utilisation.target": 0.5}, "unknown option 'job.autoscaler.utilisation.target'"),
        ({"job.autoscaler.window": 30}, "did you mean job.autoscaler.metrics.window?"),
        (
            {"metrics.window": "thirty seconds"},
            "metrics.window: 'thirty seconds' is not a duration: write 30 s",
        ),
        ({"metrics.window": "30 fortnights"}, "is not a duration"),
        ({"utilization.target": "high"}, "utilization.target: 'high' is not a number"),
        ({"utilization.target": 1.5}, "utilization.target must be in [0, 1]"),
        ({"restart.time-tracking.enabled": "yes"}, "is not true or false"),
        ({"vertex.max-parallelism": 2.5}, "is not a whole number"),
        ({"scaling.parallelism-alignment.mode": "ROUND"}, "is not one of BALANCED, EVENLY_SPREAD, OFF"),
    ],
)
def test_a_wrong_key_or_value_is_refused_at_load_with_the_fix(flink: dict[str, Any], said: str) -> None:
    message = problem(pipeline(flink))
    assert "controller" in message and said in message


@given(
    seconds=st.integers(min_value=1, max_value=10_000),
    unit=st.sampled_from(
        [("s", 1), (" s", 1), ("sec", 1), ("m", 60), (" min", 60), ("h", 3600), ("ms", 0.001)]
    ),
)
def test_a_duration_as_flink_writes_it_is_that_many_seconds(seconds: int, unit: tuple[str, float]) -> None:
    text, factor = unit
    options = flink_options({PREFIX + "metrics.window": f"{seconds}{text}"})
    assert options.metrics_window == pytest.approx(seconds * factor)
    assert flink_options({"metrics.window": seconds}).metrics_window == seconds
