"""Invariants of the scaling core, checked with hypothesis over many generated inputs."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tidal.scaling import (
    KpaDecider,
    KpaSpec,
    NumaflowScale,
    PartitionMetrics,
    Pressure,
    PressureCheck,
    Rule,
    TimedBuckets,
    VertexKind,
    decide,
)
from tidal.scaling.rates import GaugeWindow

from .conftest import NOW, source, udf

metric = st.one_of(st.none(), st.floats(min_value=-1, max_value=1e7, allow_nan=False))
positive = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@st.composite
def scale_specs(draw):
    lo = draw(st.integers(0, 10))
    hi = draw(st.integers(lo, 60))
    return NumaflowScale(
        min=lo,
        max=hi,
        target_processing_seconds=draw(st.floats(0.5, 120)),
        target_buffer_availability=draw(st.floats(1, 100)),
        replicas_per_scale_up=draw(st.integers(1, 5)),
        replicas_per_scale_down=draw(st.integers(1, 5)),
        scale_up_cooldown_seconds=draw(st.sampled_from([0.0, 30.0, 90.0])),
        scale_down_cooldown_seconds=draw(st.sampled_from([0.0, 30.0, 90.0])),
    )


@st.composite
def observations(draw):
    kind = draw(st.sampled_from(list(VertexKind)))
    replicas = draw(st.integers(0, 80))
    ready = draw(st.integers(0, replicas))
    n = draw(st.integers(0, 3))
    partitions = tuple(PartitionMetrics(f"p{i}", draw(metric), draw(metric)) for i in range(n))
    base = source() if kind == VertexKind.SOURCE else udf(kind=kind)
    return replace(
        base,
        replicas=replicas,
        ready_replicas=ready,
        partitions=partitions,
        last_scaled_at=NOW - draw(st.floats(0, 500)),
    )


pressures = st.sampled_from(
    [
        PressureCheck.none(),
        PressureCheck(Pressure.DIRECT, "b", 0.95, "direct"),
        PressureCheck(Pressure.DOWNSTREAM, "c", 0.95, "downstream"),
    ]
)


@settings(max_examples=400, deadline=None)
@given(scale_specs(), observations(), pressures)
def test_numaflow_decision_invariants(scale, obs, pressure):
    d = decide(scale, obs, NOW, pressure)
    assert d.desired >= 0
    assert d.reason
    if not d.changed:
        return
    if d.rule in (Rule.INTO_BOUNDS,):
        assert scale.min <= d.desired <= scale.max
        return
    # every other move lands within [min, max] ...
    assert scale.min <= d.desired <= scale.max
    # ... and moves one step at most
    if d.desired > d.current:
        assert d.desired - d.current <= scale.replicas_per_scale_up
    else:
        assert d.current - d.desired <= scale.replicas_per_scale_down
    # back pressure never raises the count (a MonoVertex has no buffer downstream, so none: §1.10)
    if pressure.level != Pressure.NONE and obs.kind != VertexKind.MONOVERTEX:
        assert d.desired <= d.current or d.rule in (Rule.WAKE_ON_PENDING, Rule.PEEK)


@settings(max_examples=300, deadline=None)
@given(scale_specs(), observations())
def test_unavailable_metrics_never_change_replicas(scale, obs):
    obs = replace(obs, partitions=(*obs.partitions, PartitionMetrics("na", None, 5.0)))
    d = decide(scale, obs, NOW)
    if d.rule == Rule.METRICS_UNAVAILABLE:
        assert not d.changed


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), positive), min_size=1, max_size=200))
def test_panic_never_lowers_the_count(events):
    d = KpaDecider("svc", KpaSpec(stable_window=10), 0.0, ready=1)
    t = 0.0
    ready = 1
    previous = None
    for gap, value in events:
        t += gap
        d.record(t, value)
        r = d.scale(t, ready=ready, current=ready)
        if r.valid and r.panicking and previous is not None and previous.panicking:
            assert r.decision.desired >= previous.decision.desired
        if r.valid:
            previous = r
            ready = max(r.decision.desired, 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), positive), min_size=1, max_size=200))
def test_kpa_desired_within_bounds(events):
    spec = KpaSpec(stable_window=10, min_scale=0, max_scale=0)
    d = KpaDecider("svc", spec, 0.0, ready=1)
    t, ready = 0.0, 1
    for gap, value in events:
        t += gap
        d.record(t, value)
        r = d.scale(t, ready=ready, current=ready)
        if r.valid and not r.panicking:
            r_ = max(1, ready)
            assert r.decision.desired <= max(1000 * r_, 1) or r.decision.rule == Rule.KPA_SCALE_DOWN_DELAY
            ready = r.decision.desired


@settings(max_examples=300, deadline=None)
@given(st.lists(positive, min_size=1, max_size=120), st.integers(1, 60))
def test_full_window_average_is_plain_mean(values, window):
    b = TimedBuckets(window=float(window))
    for i, v in enumerate(values):
        b.record(1000.0 + i, v)
    now = 1000.0 + len(values) - 1
    tail = values[-window:]
    assert b.window_average(now) >= 0
    if len(values) >= window:
        assert abs(b.window_average(now) - sum(tail) / window) <= 1e-6 * max(1.0, *tail) + 1e-6


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20), positive), min_size=1, max_size=100),
    st.integers(1, 60),
    st.integers(0, 200),
)
def test_window_average_never_negative(events, window, later):
    b = TimedBuckets(window=float(window))
    t = 0.0
    for gap, v in events:
        t += gap
        b.record(t, v)
    assert b.window_average(t + later) >= 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-5, 100000)), min_size=2, max_size=100))
def test_pending_average_within_sample_range(values):
    g = GaugeWindow()
    for i, v in enumerate(values):
        g.record(float(i), v)
    avg = g.average(float(len(values) - 1), lookback=1e9)
    ok = [v for v in values if v is not None and v >= 0]
    if avg is not None:
        assert min(ok) <= avg <= max(ok)
