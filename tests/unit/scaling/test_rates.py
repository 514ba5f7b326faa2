"""Numaflow's rater: rate and pending over the lookback (numaflow.md §3.3–3.4)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidal.scaling.lookback import adaptive_lookback
from tidal.scaling.rates import CounterWindow, GaugeWindow, Rater


def counters(*samples: tuple[float, dict[str, float]]) -> CounterWindow:
    w = CounterWindow()
    for t, c in samples:
        w.record(t, c)
    return w


def test_rate_not_available_with_fewer_than_two_samples():
    assert CounterWindow().rate(0, 120) is None
    assert counters((0, {"p": 5})).rate(0, 120) is None


def test_rate_excludes_newest_sample():
    w = counters((0, {"p": 0}), (5, {"p": 500}), (10, {"p": 100000}))
    assert w.rate(10, 120) == 100.0  # (500 − 0) / 5


def test_rate_sums_pods():
    w = counters((0, {"a": 0, "b": 0}), (5, {"a": 100, "b": 400}), (10, {"a": 0, "b": 0}))
    assert w.rate(10, 120) == 100.0


def test_rate_counter_reset_counts_whole_new_value():
    w = counters((0, {"p": 1000}), (5, {"p": 50}), (10, {"p": 60}), (15, {"p": 0}))
    assert w.rate(15, 120) == pytest.approx((50 + 10) / 10)


def test_rate_new_pod_contributes_whole_counter():
    w = counters((0, {"a": 0}), (5, {"a": 100, "b": 30}), (10, {}))
    w.record(10, {"a": 100})
    assert w.rate(10, 120) == pytest.approx(130 / 5)


def test_rate_pod_missing_a_scrape_does_not_spike():
    # Deliberate difference: upstream counts b's whole counter (5000) again when it returns.
    w = counters((0, {"a": 0, "b": 5000}), (5, {"a": 50}), (10, {"a": 100, "b": 5100}), (15, {"a": 0}))
    assert w.rate(15, 120) == pytest.approx((50 + 50 + 100) / 10)


def test_rate_window_start_is_inclusive_and_old_samples_ignored():
    w = counters(*[(t, {"p": t * 10}) for t in range(0, 101, 5)])
    # lookback 20 at now=100: start is t=80, end is t=95 (newest excluded)
    assert w.rate(100, 20) == pytest.approx(10.0)


def test_rate_not_available_when_second_newest_is_too_old():
    w = counters((0, {"p": 0}), (5, {"p": 5}), (200, {"p": 10}))
    assert w.rate(200, 120) is None


def test_rate_zero_dt_is_not_available():
    w = counters((5, {"p": 0}), (10, {"p": 5}))
    assert w.rate(10, 120) is None  # start and end are the same sample


def test_counter_samples_must_be_in_time_order():
    w = counters((5, {"p": 0}))
    with pytest.raises(ValueError, match="time order"):
        w.record(4, {"p": 1})


def test_empty_tick_adds_nothing():
    w = counters((0, {"p": 0}))
    w.record(5, {})
    assert len(w) == 1


def test_pending_mean_includes_newest_and_floors():
    g = GaugeWindow()
    for t, v in [(0, 10), (5, 11), (10, 12), (15, 13)]:
        g.record(t, v)
    assert g.average(15, 120) == 11.0  # 46 // 4


def test_pending_drops_unavailable_samples():
    # Deliberate difference (Go runtime, seed 002): -1 is dropped, not averaged in.
    g = GaugeWindow()
    for t, v in [(0, 100), (5, -1), (10, None), (15, 200)]:
        g.record(t, v)
    assert g.average(15, 120) == 150.0


def test_pending_always_unavailable_is_none():
    g = GaugeWindow()
    for t in (0, 5, 10):
        g.record(t, -1)
    assert g.average(10, 120) is None


def test_pending_needs_two_samples():
    g = GaugeWindow()
    g.record(0, 5)
    assert g.average(0, 120) is None


def test_gauge_latest():
    g = GaugeWindow()
    assert g.latest() is None
    g.record(0, 3)
    assert g.latest() == 3


@pytest.mark.parametrize("capacity", [0, 1])
def test_capacity_must_hold_two_samples(capacity):
    with pytest.raises(ValueError):
        CounterWindow(capacity)
    with pytest.raises(ValueError):
        GaugeWindow(capacity)


def test_ring_capacity_bounds_history():
    w = CounterWindow(capacity=3)
    for t in range(10):
        w.record(t, {"p": t})
    assert len(w) == 3


def test_adaptive_lookback_steady_traffic_keeps_configured():
    w = counters(*[(t, {"p": t * 10}) for t in range(0, 400, 5)])
    assert adaptive_lookback(w, 395, current=120, configured=120) == 120


def test_adaptive_lookback_grows_to_cover_quiet_spell():
    # the counter rises, then stays flat for 150 s, then rises again: round up to 180 s
    samples = [
        (t, {"p": 100.0 if 50 <= t < 200 else (t * 1.0 if t < 50 else 100 + t)}) for t in range(0, 360, 5)
    ]
    w = counters(*samples)
    assert adaptive_lookback(w, 355, current=120, configured=120) == 180


def test_adaptive_lookback_capped_at_600():
    samples = [(t, {"p": 1.0 if t > 0 else 0.0}) for t in range(0, 2000, 10)]
    samples.append((2000, {"p": 2.0}))
    samples.append((2010, {"p": 2.0}))
    w = counters(*samples)
    assert adaptive_lookback(w, 2010, current=500, configured=120) == 600


def test_adaptive_lookback_trailing_zero_run_does_not_count():
    w = counters(*[(t, {"p": 0}) for t in range(0, 400, 5)])
    assert adaptive_lookback(w, 395, current=300, configured=120) == 120


def test_adaptive_lookback_shrinks_back_to_configured():
    w = counters(*[(t, {"p": t * 10}) for t in range(0, 1000, 5)])
    assert adaptive_lookback(w, 995, current=600, configured=120) == 120


def test_adaptive_lookback_with_too_few_samples_keeps_current():
    assert adaptive_lookback(CounterWindow(), 0, current=240, configured=120) == 240


# -- the fused Rater, the sliding start index, compaction ------------------------------------


def reference_start(timestamps: list[float], now: float, lookback: float) -> int | None:
    """Numaflow findStartIndex by linear scan over indexes 0 … n − 2."""
    n = len(timestamps)
    if n < 2 or timestamps[n - 2] < now - lookback:
        return None
    for i in range(n - 1):
        if timestamps[i] >= now - lookback:
            return i
    return n - 2


# A run: per tick, a time step (0 = same timestamp again), two pods' counter steps (negative =
# a restart), a pending value (negative = not available), and the lookback of a query after it.
ticks = st.lists(
    st.tuples(
        st.sampled_from([0, 1, 1, 1, 2, 5, 30]),
        st.integers(-50, 500),
        st.integers(-50, 500),
        st.integers(-5, 5000),
        st.sampled_from([1, 3, 10, 60, 120, 600]),
    ),
    min_size=1,
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(ticks, st.integers(2, 20))
def test_rater_equals_counter_plus_gauge_windows(run, capacity):
    rater, counter, gauge = Rater(capacity), CounterWindow(capacity), GaugeWindow(capacity)
    now, pods = 0.0, {"a": 0.0, "b": 0.0}
    for step, da, db, pending, lookback in run:
        now += step
        pods = {"a": pods["a"] + da if da >= 0 else 0.0, "b": pods["b"] + db if db >= 0 else 0.0}
        rater.record(now, dict(pods), pending)
        counter.record(now, dict(pods))
        gauge.record(now, pending)
        assert rater.metrics(now, lookback) == (counter.rate(now, lookback), gauge.average(now, lookback))
        assert len(rater) == len(gauge) <= capacity


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([1, 1, 1, 2, 7]), min_size=1, max_size=200),
    st.lists(st.sampled_from([1, 2, 5, 30, 120, 600]), min_size=1, max_size=200),
    st.integers(2, 50),
)
def test_sliding_start_index_matches_a_linear_scan(steps, lookbacks, capacity):
    window = GaugeWindow(capacity)
    kept: list[float] = []
    now = 0.0
    for i, step in enumerate(steps):
        now += step
        window.record(now, 1.0)
        kept = [*kept, now][-capacity:]
        lookback = lookbacks[i % len(lookbacks)]
        found = window._start_index(now, lookback)
        expected = reference_start(kept, now, lookback)
        assert (None if found is None else found - window._start) == expected


def test_windows_keep_working_across_compactions():
    rater = Rater(capacity=4)
    for t in range(1000):
        rater.record(float(t), {"p": 10.0 * t}, pending=t)
    assert len(rater) == 4
    assert rater.metrics(999, 120) == (10.0, 997.0)  # samples 996 … 999; rate over 996 → 998
    assert len(rater._ts) < 2 * 4  # compacted, not growing


def test_rater_without_counters_counts_nothing_processed():
    rater = Rater()
    rater.record(0, {"p": 0}, 10)
    rater.record(1, {}, 10)
    rater.record(2, {}, 10)
    assert rater.metrics(2, 120) == (0.0, 10.0)


def test_rater_unavailable_pending_is_dropped():
    rater = Rater()
    for t, pending in enumerate([100, -1, None, float("nan"), 300]):
        rater.record(t, {"p": t}, pending)
    assert rater.pending(4, 120) == 200.0
    assert rater.latest_pending() == 300.0


def test_rater_same_timestamp_merges_counts_and_replaces_pending():
    rater = Rater()
    rater.record(0, {"a": 0}, 10)
    rater.record(1, {"a": 100}, 20)
    rater.record(1, {"b": 50}, 40)  # second report for t=1: pod b joins, pending replaced
    rater.record(2, {"a": 100, "b": 50}, 40)
    assert rater.metrics(2, 120) == (150.0, 30.0)
    assert len(rater) == 3
