"""Numaflow's rater: rate and pending over the lookback (numaflow.md §3.3–3.4)."""

import pytest

from tidal.scaling.rates import CounterWindow, GaugeWindow, adaptive_lookback


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
