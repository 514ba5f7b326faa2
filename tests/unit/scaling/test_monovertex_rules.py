"""Numaflow's MonoVertex rules (``spec/numaflow.md`` §1.10), one test per difference from a vertex."""

from __future__ import annotations

import dataclasses

import pytest

from tidal.scaling import NumaflowScale, PartitionMetrics, Rule, VertexKind, VertexObservation, decide
from tidal.scaling.backpressure import Pressure, PressureCheck

SCALE = NumaflowScale(target_processing_seconds=2, lookback_seconds=10)
NOW = 1000.0


def observe(kind: VertexKind, *, rate: float = 100.0, pending: float = 2000.0, replicas: int = 2, **kw):
    return VertexObservation(
        "m", kind, replicas=replicas, ready_replicas=replicas, last_scaled_at=0.0,
        partitions=(PartitionMetrics("m", rate, pending),), started_at=0.0, **kw,
    )  # fmt: skip


def test_the_time_model_on_its_sources_pending_with_no_buffer_model():
    # 2000 pending at 100/s over 2 replicas, 2 s target: 2000 / (2 × 50) = 20 → +2 a step.
    d = decide(SCALE, observe(VertexKind.MONOVERTEX), NOW)
    assert (d.rule, d.desired) == (Rule.SCALE_UP, 4)
    assert d.inputs["pending"] == 2000


def test_no_back_pressure_a_monovertex_has_no_buffer_downstream():
    direct = PressureCheck(Pressure.DIRECT, "next", 0.95)
    assert decide(SCALE, observe(VertexKind.MONOVERTEX), NOW, direct).desired == 4
    assert decide(SCALE, observe(VertexKind.SOURCE), NOW, direct).desired == 1  # a vertex backs off


def test_the_cooldown_is_checked_before_the_phase():
    recent = dict(last_scaled_at=NOW - 5, running=False)
    mono = decide(SCALE, dataclasses.replace(observe(VertexKind.MONOVERTEX), **recent), NOW)
    vertex = decide(SCALE, dataclasses.replace(observe(VertexKind.SOURCE), **recent), NOW)
    assert (mono.rule, vertex.rule) == (Rule.COOLDOWN, Rule.NOT_RUNNING)
    later = decide(SCALE, dataclasses.replace(observe(VertexKind.MONOVERTEX), running=False), NOW)
    assert later.rule == Rule.NOT_RUNNING


def test_pending_with_no_rate_keeps_the_current_replicas():
    d = decide(SCALE, observe(VertexKind.MONOVERTEX, rate=0.0, replicas=3), NOW)
    assert d.desired == 3


def test_the_rate_limit_is_max_times_read_batch_size():
    obs = observe(VertexKind.MONOVERTEX, rate=1000.0, pending=100_000, rate_limit_max=2, read_batch_size=500)
    d = decide(SCALE, obs, NOW)
    assert d.rule == Rule.RATE_LIMITED  # 1000/s is at 2 × 500


@pytest.mark.parametrize("kind", [VertexKind.MONOVERTEX, VertexKind.SOURCE])
def test_at_zero_it_peeks_like_a_source_after_the_zero_replica_sleep(kind):
    scale = dataclasses.replace(
        SCALE, zero_replica_sleep_seconds=30, scale_up_cooldown_seconds=5, scale_down_cooldown_seconds=5
    )
    obs = observe(kind, replicas=0, pending=0.0, rate=0.0)
    assert decide(scale, dataclasses.replace(obs, last_scaled_at=NOW - 10), NOW).desired == 0
    assert decide(scale, dataclasses.replace(obs, last_scaled_at=NOW - 31), NOW).desired == 1
