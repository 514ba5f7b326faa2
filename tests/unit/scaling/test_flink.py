"""Flink's ``JobVertexScalerTest`` (flink-kubernetes-operator, flink-autoscaler), ported case by
case: same inputs, same expected parallelism. Flink's test setup pins the deprecated blocking
alignment (``KeyGroupOrPartitionsAdjustMode.EVENLY_SPREAD``), a scale-down factor of 1, an
unbounded scale-up factor and a zero catch-up duration; so does :func:`opts`."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal.scaling import flink
from tidal.scaling.flink import (
    DelayedScaleDown,
    FlinkOptions,
    ParallelismChange,
    ScalingSummary,
    VertexMetrics,
    compute_scale_target,
    java_round,
    observed_average,
    select_true_processing_rate,
)
from tidal.scaling.flink_align import AlignmentMode, align

MAX_INT = 2**31 - 1
RESTART = 300.0  # Flink's restart.time default, which the test's thresholds are computed with


def opts(**kw: object) -> FlinkOptions:
    base: dict[str, object] = {
        "scale_down_max_factor": 1.0,
        "scale_up_max_factor": float(MAX_INT),
        "catch_up_duration": 0.0,
        "scale_down_interval": 3600.0,
        "vertex_max_parallelism": 200,
        "scaling_parallelism_alignment_mode": AlignmentMode.LEGACY_EVENLY_SPREAD,
    }
    base.update(kw)
    return FlinkOptions(**base)  # type: ignore[arg-type]


def evaluated(parallelism: int, target: float, tpr: float, keyed: bool = True) -> VertexMetrics:
    """Flink's ``evaluated(parallelism, targetDataRate, trueProcessingRate)``: max parallelism 720."""
    return VertexMetrics(parallelism, tpr, target, 0.0, 720, 0, keyed)


def change(
    m: VertexMetrics, o: FlinkOptions, delayed: DelayedScaleDown | None = None, now: float = 0.0
) -> tuple[int, int, bool]:
    c = compute_scale_target(m, o, now=now, restart_time=RESTART, delayed=delayed or DelayedScaleDown())
    return _triple(c)


def _triple(c: ParallelismChange) -> tuple[int, int, bool]:
    """Flink's equality: with no change, ``outsideUtilizationBound`` does not matter."""
    return (c.new, c.current, False if c.no_change else c.outside_bound)


def scale(
    current: int,
    max_parallelism: int,
    factor: float,
    lower: int = 1,
    upper: int = MAX_INT,
    *,
    partitions: int = 0,
    keyed: bool = False,
    mode: AlignmentMode = AlignmentMode.LEGACY_EVENLY_SPREAD,
) -> int:
    """Flink's ``vertexScaler.scale(...)`` argument order: current, max parallelism, factor, limits."""
    return flink.scale(
        current,
        factor,
        lower,
        upper,
        max_parallelism=max_parallelism,
        partitions=partitions,
        keyed=keyed,
        mode=mode,
    )[0]


@pytest.mark.parametrize("keyed", [True])  # both of Flink's input sets contain HASH
def test_parallelism_scaling(keyed: bool) -> None:
    o = opts(utilization_target=1.0, scale_down_interval=0.0)
    assert change(evaluated(10, 50, 100), o) == (5, 10, True)
    o = dataclasses.replace(o, utilization_target=0.8)
    assert change(evaluated(10, 50, 100), o) == (8, 10, False)
    assert change(evaluated(10, 80, 100), o) == (10, 10, False)
    assert change(evaluated(10, 60, 100), o) == (8, 10, False)
    assert change(evaluated(10, 59, 100), o) == (8, 10, False)
    assert change(evaluated(2, 100, 40), dataclasses.replace(o, utilization_target=0.5)) == (10, 2, True)
    assert change(evaluated(2, 100, 100), dataclasses.replace(o, utilization_target=0.6)) == (4, 2, True)
    o = dataclasses.replace(o, utilization_target=1.0, scale_down_max_factor=0.5)
    assert change(evaluated(10, 10, 100), o) == (5, 10, True)
    o = dataclasses.replace(o, scale_down_max_factor=0.6)
    assert change(evaluated(10, 10, 100), o) == (4, 10, True)
    o = dataclasses.replace(o, scale_up_max_factor=0.5)
    assert change(evaluated(10, 200, 10), o) == (15, 10, True)
    o = dataclasses.replace(o, scale_up_max_factor=0.6)
    assert change(evaluated(10, 200, 10), o) == (16, 10, True)


def test_parallelism_computation() -> None:
    assert scale(1, 720, 0.0001) == 1
    assert scale(2, 720, 0.1) == 1
    assert scale(6, 720, 0.8) == 5
    assert scale(16, 128, 1.5) == 24
    assert scale(200, 720, 2) == 400
    assert scale(200, 720, MAX_INT) == 720


def test_parallelism_computation_with_adjustment() -> None:
    assert scale(6, 36, 0.8, keyed=True) == 6
    assert scale(16, 128, 1.5, keyed=True) == 32
    assert scale(200, 720, 1.3, keyed=True) == 360
    assert scale(200, 720, MAX_INT, keyed=True) == 720
    assert scale(10, 128, 2.5, keyed=True) == 32
    assert scale(10, 128, 2.5, 1, 128, keyed=True, mode=AlignmentMode.LEGACY_MAXIMIZE_UTILISATION) == 26


def test_parallelism_computation_with_limit() -> None:
    assert scale(6, 720, 0.8, 1, 700, keyed=True) == 5
    assert scale(8, 720, 0.8, 8, 700, keyed=True) == 8
    assert scale(16, 128, 1.5, 1, MAX_INT, keyed=True) == 32
    assert scale(16, 128, 1.5, 60, MAX_INT, keyed=True) == 64
    assert scale(200, 720, 2, 1, 300, keyed=True) == 240
    assert scale(200, 720, MAX_INT, 1, 600, keyed=True) == 360


def test_min_parallelism_must_not_exceed_max() -> None:
    with pytest.raises(ValueError):
        scale(200, 720, MAX_INT, 500, 499)


def test_min_parallelism_limit_is_used() -> None:
    o = opts(vertex_min_parallelism=5, scale_down_interval=0.0)
    assert change(evaluated(10, 100, 500, keyed=False), o) == (5, 10, True)
    assert change(evaluated(4, 100, 500, keyed=False), o) == (4, 4, False)  # a lower current is respected


def test_max_parallelism_limit_is_used() -> None:
    o = opts(vertex_max_parallelism=10, utilization_target=1.0)
    assert change(evaluated(10, 500, 100, keyed=False), o) == (10, 10, False)
    assert change(evaluated(12, 500, 100, keyed=False), o) == (12, 12, False)  # a higher current is respected


def test_disable_scale_down_interval() -> None:
    o = opts(utilization_target=1.0, scale_down_interval=0.0)
    assert change(evaluated(10, 50, 100, keyed=False), o) == (5, 10, True)


def test_scale_down_after_interval() -> None:
    o, d = opts(utilization_target=1.0, scale_down_interval=60.0), DelayedScaleDown()
    assert change(evaluated(100, 800, 1000, keyed=False), o, d, 0) == (100, 100, False)
    assert change(evaluated(100, 900, 1000, keyed=False), o, d, 10) == (100, 100, False)
    assert change(evaluated(100, 720, 1000, keyed=False), o, d, 40) == (100, 100, False)
    assert change(evaluated(100, 640, 1000, keyed=False), o, d, 59) == (100, 100, False)
    # the largest recommendation within the interval, not the latest
    assert change(evaluated(100, 700, 1000, keyed=False), o, d, 60) == (90, 100, False)


def test_immediate_scale_up_within_scale_down_interval() -> None:
    o, d = opts(utilization_target=1.0, scale_down_interval=60.0), DelayedScaleDown()
    assert change(evaluated(100, 800, 1000, keyed=False), o, d, 0) == (100, 100, False)
    assert change(evaluated(100, 900, 1000, keyed=False), o, d, 10) == (100, 100, False)
    assert d.first_trigger is not None
    assert change(evaluated(100, 1700, 1000, keyed=False), o, d, 12) == (170, 100, True)
    assert d.first_trigger is None


def test_cancel_delayed_scale_down_after_new_parallelism_is_same() -> None:
    o, d = opts(utilization_target=1.0, scale_down_interval=60.0), DelayedScaleDown()
    assert change(evaluated(100, 800, 1000, keyed=False), o, d, 0) == (100, 100, False)
    assert change(evaluated(100, 900, 1000, keyed=False), o, d, 10) == (100, 100, False)
    assert change(evaluated(100, 1000, 1000, keyed=False), o, d, 12) == (100, 100, False)
    assert d.first_trigger is None


def test_max_recommended_parallelism_used_after_scale_down_interval() -> None:
    o, d = opts(utilization_target=1.0, scale_down_interval=60.0), DelayedScaleDown()
    assert change(evaluated(100, 500, 1000, keyed=False), o, d, 0) == (100, 100, False)
    assert [p for _, p, _ in d.recommended] == [50]
    assert change(evaluated(100, 600, 1000, keyed=False), o, d, 30) == (100, 100, False)
    assert [p for _, p, _ in d.recommended] == [60]  # 50 evicted: the list only decreases
    assert change(evaluated(100, 600, 1000, keyed=False), o, d, 65) == (60, 100, True)


def test_max_recommended_equal_to_current_is_no_change() -> None:
    o, d = opts(utilization_target=1.0, scale_down_interval=60.0), DelayedScaleDown()
    d.trigger(5, 100, True)
    assert change(evaluated(100, 800, 1000, keyed=False), o, d, 65) == (100, 100, False)


def test_ineffective_scaling_detection() -> None:
    """Flink's ``testIneffectiveScalingDetection``: a scale-up that achieved under 10 % of the
    increase it expected blocks the next one, if detection is enabled."""
    o = opts(utilization_target=1.0, scale_down_interval=0.0, scaling_effectiveness_detection_enabled=True)
    d = DelayedScaleDown()
    first = compute_scale_target(evaluated(5, 100, 50), o, now=0, restart_time=RESTART, delayed=d)
    assert _triple(first) == (10, 5, True)
    assert first.expected_processing_rate == 100
    last = ScalingSummary(5, 10, 50, first.expected_processing_rate)
    # effective: 50 → 96 of an expected 100; scales on
    step = compute_scale_target(evaluated(10, 180, 90), o, now=1, restart_time=RESTART, delayed=d, last=last)
    assert _triple(step) == (20, 10, True)
    # ineffective: 50 → 53 of an expected 100; blocked
    step = compute_scale_target(evaluated(10, 180, 53), o, now=2, restart_time=RESTART, delayed=d, last=last)
    assert (step.new, step.step) == (10, "ineffective")
    # detection off: the same numbers scale
    off = dataclasses.replace(o, scaling_effectiveness_detection_enabled=False)
    step = compute_scale_target(
        evaluated(10, 180, 53), off, now=3, restart_time=RESTART, delayed=d, last=last
    )
    assert step.new == 36  # 34 aligned up to a divisor of 720


def test_num_partitions_adjustment() -> None:
    assert scale(6, 128, 0.4, partitions=15) == 3
    assert scale(7, 128, 1.2, partitions=15) == 15
    assert scale(20, 30, 0.9, partitions=35) == 18
    assert scale(22, 30, 1.1, 20, partitions=35) == 22  # nothing aligned without turning: blocked
    assert scale(80, 128, 1.4, partitions=200) == 100
    assert scale(24, MAX_INT, 4, partitions=199) == 199
    assert scale(24, MAX_INT, 4, partitions=199, mode=AlignmentMode.LEGACY_MAXIMIZE_UTILISATION) == 100


def test_balanced_keeps_the_target_where_nothing_aligns() -> None:
    """The default mode never blocks (FLIP-586): the case the legacy mode held at 22 scales."""
    assert scale(22, 30, 1.1, 20, partitions=35, mode=AlignmentMode.BALANCED) == 25
    assert scale(22, 30, 1.1, 20, partitions=35, mode=AlignmentMode.EVENLY_SPREAD) == 25
    assert scale(22, 30, 1.1, 20, partitions=35, mode=AlignmentMode.OFF) == 25


def test_java_round_is_half_up() -> None:
    assert (java_round(62.5), java_round(2.5), java_round(-0.5)) == (63, 3, 0)


modes = st.sampled_from(list(AlignmentMode))


@given(
    mode=modes,
    current=st.integers(1, 300),
    target=st.integers(1, 300),
    n=st.integers(1, 400),
    source=st.booleans(),
    lower=st.integers(1, 20),
)
def test_alignment_never_inverts_a_decision(
    mode: AlignmentMode, current: int, target: int, n: int, source: bool, lower: int
) -> None:
    """FLINK-39299: whatever the mode, a scale-up stays above the current parallelism (or holds)
    and a scale-down below it (or holds)."""
    if target == current:
        return
    lower = min(lower, current, target)
    got = align(
        mode,
        current=current,
        target=target,
        partitions=n if source else 0,
        max_parallelism=max(n, target),
        lower=lower,
        upper=max(current, target, 200),
        keyed=not source,
    ).parallelism
    if target > current:
        assert got >= current
        assert got == current or got >= target or mode.name.startswith("LEGACY")
    else:
        assert got <= current


@given(
    current=st.integers(1, 100),
    target=st.floats(0, 1e5),
    tpr=st.floats(1e-3, 1e5),
    catch_up=st.floats(0, 1e4),
    mode=modes,
    keyed=st.booleans(),
)
def test_the_decision_follows_the_scale_factor(
    current: int, target: float, tpr: float, catch_up: float, mode: AlignmentMode, keyed: bool
) -> None:
    """A scale factor above 1 never returns fewer replicas; one below 1 never more."""
    o = opts(scale_down_interval=0.0, scaling_parallelism_alignment_mode=mode, catch_up_duration=300.0)
    m = VertexMetrics(current, tpr, target, catch_up, 128, 0, keyed)
    c = compute_scale_target(m, o, now=0, restart_time=60, delayed=DelayedScaleDown())
    if c.scale_factor >= 1:
        assert c.new >= current
    if c.scale_factor <= 1:
        assert c.new <= current
    assert 1 <= c.new <= max(current, 200)


def test_observed_rate_replaces_busy_time_only_when_well_below_it() -> None:
    o = FlinkOptions()
    assert select_true_processing_rate(1000, math.nan, o) == (1000, "busy time")
    assert select_true_processing_rate(math.inf, 80, o) == (80, "observed")
    assert select_true_processing_rate(114, 100, o) == (114, "busy time")  # within the 15 %
    assert select_true_processing_rate(116, 100, o) == (100, "observed")
    assert math.isnan(observed_average([100.0], 2)) and observed_average([100.0, 200.0], 2) == 150
    assert observed_average([math.inf], 2) == math.inf and observed_average([math.inf, 10, 20], 2) == 15


def test_flink_39299_a_scale_down_is_not_aligned_up_past_the_current() -> None:
    """Before FLINK-39299 a scale-down 7 → 5 over 16 key groups searched upward to the divisor 8,
    a scale-up. Now the search stops at the current parallelism."""
    factor = 5 / 7
    assert scale(7, 16, factor, keyed=True) == 4  # legacy: relaxed downward to a divisor
    assert scale(7, 16, factor, keyed=True, mode=AlignmentMode.BALANCED) == 6  # 16 // 6 < 16 // 5
    assert scale(7, 16, factor, keyed=True, mode=AlignmentMode.EVENLY_SPREAD) == 5  # nothing: kept
