"""Faithfulness to upstream's behaviour, one test per rule, named after it (issue #15)."""

from __future__ import annotations

import logging

import pytest

from tidal.errors import SpecError
from tidal.scaling import (
    BufferInfo,
    NumaflowScale,
    PartitionMetrics,
    Rule,
    VertexKind,
    VertexObservation,
    decide,
    desired_replicas,
    normalise_scale,
)
from tidal.spec import parse_pipeline
from tidal.spec.validate import numaflow_scale


def _pipeline(scale: dict[str, object]) -> dict[str, object]:
    return {
        "name": "p",
        "vertices": [
            {"name": "in", "source": {"generator": {}}, "scale": scale},
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "in", "to": "out"}],
    }


def test_max_lookback_seconds_caps_lookback_at_600_with_a_notice(caplog: pytest.LogCaptureFixture) -> None:
    spec = parse_pipeline(_pipeline({"lookbackSeconds": 900}))
    with caplog.at_level(logging.WARNING, logger="tidal.spec"):
        scale = numaflow_scale(spec.vertices[0].scale, "vertices[0]")
    assert scale.lookback_seconds == 600
    assert "vertices[0].scale.lookbackSeconds: 900 is above 600" in caplog.text


def test_deprecated_replicas_per_scale_sets_both_steps_when_absent() -> None:
    scale, notices = normalise_scale({}, replicas_per_scale=5)
    assert (scale.replicas_per_scale_up, scale.replicas_per_scale_down) == (5, 5)
    assert len(notices) == 2


def test_deprecated_replicas_per_scale_yields_to_the_new_fields() -> None:
    spec = parse_pipeline(_pipeline({"replicasPerScale": 5, "replicasPerScaleUp": 3}))
    scale = numaflow_scale(spec.vertices[0].scale)
    assert (scale.replicas_per_scale_up, scale.replicas_per_scale_down) == (3, 5)


def test_empty_cron_timezone_means_utc() -> None:
    cron = {
        "timezone": "",
        "schedules": [{"start": "0 0 9 * * *", "end": "0 0 17 * * *", "min": 1, "max": 3}],
    }
    spec = parse_pipeline(_pipeline({"min": 0, "max": 5, "cron": cron}))
    scale = numaflow_scale(spec.vertices[0].scale)
    assert scale.cron is not None and scale.cron.timezone_name == "UTC"


def test_validator_still_refuses_a_negative_min() -> None:
    with pytest.raises(SpecError, match=r"vertices\[0\]\.scale\.min: -1 is negative"):
        parse_pipeline(_pipeline({"min": -1}))


def _stalled(replicas: int, ready: int) -> VertexObservation:
    return VertexObservation(
        "map",
        VertexKind.SOURCE,
        replicas=replicas,
        ready_replicas=ready,
        last_scaled_at=0.0,
        partitions=(PartitionMetrics("map", rate=0.0, pending=3000.0),),
    )


@pytest.mark.parametrize("ready", [1, 2, 4])
def test_monovertex_stall_rule_holds_the_current_count_whatever_is_ready(ready: int) -> None:
    """A stall (pending, no progress) is no evidence that fewer replicas would do."""
    d = decide(NumaflowScale(), _stalled(replicas=4, ready=ready), now=1000.0)
    assert d.desired == 4
    assert d.rule == Rule.STEADY
    assert "no progress" in d.reason


def test_desired_replicas_of_an_idle_vertex_is_zero_as_decide_says() -> None:
    obs = VertexObservation(
        "map",
        VertexKind.UDF,
        replicas=2,
        ready_replicas=2,
        last_scaled_at=0.0,
        partitions=(PartitionMetrics("map", rate=0.0, pending=0.0),),
        buffers=(BufferInfo("map", 30000, 0.8),),
    )
    assert desired_replicas(NumaflowScale(), obs).desired == 0
    assert decide(NumaflowScale(), obs, now=1000.0).recommended == 0


def _started(pending: float, rate: float) -> VertexObservation:
    return VertexObservation(
        "map",
        VertexKind.SOURCE,
        replicas=3,
        ready_replicas=3,
        last_scaled_at=float("-inf"),  # never scaled (Numaflow's empty lastScaledAt)
        partitions=(PartitionMetrics("map", rate=rate, pending=pending),),
        started_at=1000.0,
    )


def test_a_vertex_just_started_scales_up_at_once():
    d = decide(NumaflowScale(target_processing_seconds=1), _started(pending=60_000, rate=1_000), now=1005.0)
    assert d.rule == Rule.SCALE_UP and d.desired == 5


def test_a_vertex_just_started_waits_one_down_cooldown_before_scaling_down():
    held = decide(NumaflowScale(), _started(pending=10, rate=1_000), now=1005.0)
    assert held.rule == Rule.SCALE_DOWN_COOLDOWN and held.desired == 3
    assert "cooldown" in held.reason
    moved = decide(NumaflowScale(), _started(pending=10, rate=1_000), now=1091.0)
    assert moved.rule == Rule.SCALE_DOWN and moved.desired == 1


def test_idle_is_concluded_only_after_a_whole_lookback_since_the_start():
    def idle_at(now: float):
        obs = VertexObservation(
            "map",
            VertexKind.UDF,
            replicas=2,
            ready_replicas=2,
            last_scaled_at=float("-inf"),
            partitions=(PartitionMetrics("map", rate=0.0, pending=0.0),),
            buffers=(BufferInfo("map", 30000, 0.8),),
            started_at=1000.0,
        )
        return decide(NumaflowScale(scale_down_cooldown_seconds=0, lookback_seconds=120), obs, now)

    early = idle_at(1010.0)
    assert early.rule == Rule.WARMING_UP and early.desired == 2 and "whole lookback (120 s)" in early.reason
    assert idle_at(1121.0).desired == 0


def test_a_monovertex_negative_min_reads_as_zero_as_getminreplicas_does() -> None:
    """``validateCronScaling`` only checks ``min`` when cron is set, so a MonoVertex without cron
    gets past upstream's validator with ``min: -1``; ``GetMinReplicas`` reads it as 0."""
    spec = parse_pipeline(
        {
            "kind": "MonoVertex",
            "name": "m",
            "source": {"generator": {"rate": 10}},
            "sink": {"blackhole": {}},
            "scale": {"min": -1, "max": 3},
        }
    )
    assert numaflow_scale(spec.vertices[0].scale).min == 0
