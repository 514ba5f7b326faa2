"""Knative aggregation: the spec's worked vectors (knative.md §2) and the window rules."""

import math

import pytest

from tidal.scaling.windows import (
    MaxTimeWindow,
    TimedBuckets,
    WeightedBuckets,
    round_half_away,
    smoothing_coefficient,
)

T0 = 1_000_000.0


def five_second_window() -> TimedBuckets:
    b = TimedBuckets(window=5.0)
    for i, v in enumerate([1, 2, 3, 4, 5]):
        b.record(T0 + i, v)
    return b


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [(2.5, 0, 3), (-2.5, 0, -3), (13.5, 0, 14), (0.4999, 0, 0), (1.23456789, 6, 1.234568), (20.6, 6, 20.6)],
)
def test_round_half_away_from_zero(value, digits, expected):
    assert round_half_away(value, digits) == expected


def test_partial_window_after_first_write_is_that_value():
    b = TimedBuckets(window=5.0)
    b.record(T0, 1)
    assert b.window_average(T0) == 1.0  # not 0.2: partial window


def test_full_window_average():
    assert five_second_window().window_average(T0 + 4) == 3.0


def test_trailing_seconds_without_data_are_excluded():
    # (15 − 1 − 2) / 3: the two oldest seconds fall out, the empty trailing ones do not count
    assert five_second_window().window_average(T0 + 6) == 4.0


def test_whole_window_without_data_is_zero():
    assert five_second_window().window_average(T0 + 10) == 0.0


def test_write_after_gap_zero_fills_and_counts_inner_gaps():
    b = five_second_window()
    b.record(T0 + 6, 91)
    assert b.window_average(T0 + 6) == pytest.approx(20.6)  # 103 / 5


def test_inner_gaps_count_as_zeros():
    b = TimedBuckets(window=10.0)
    b.record(T0, 10)
    b.record(T0 + 4, 10)  # seconds 1..3 are zeros
    assert b.window_average(T0 + 4) == 4.0  # 20 / 5


def test_several_values_in_one_bucket_are_summed():
    b = TimedBuckets(window=60.0)
    b.record(T0 + 0.1, 1)
    b.record(T0 + 0.9, 2)
    assert b.window_average(T0) == 3.0


def test_value_a_whole_window_older_than_last_write_is_dropped():
    b = five_second_window()
    before = b.window_total
    b.record(T0 - 1, 100)  # b + window (T0 + 4) <= last write (T0 + 4): dropped
    assert b.window_total == before


def test_out_of_order_write_within_window_only_adds_and_moves_first_write():
    b = TimedBuckets(window=10.0)
    b.record(T0 + 5, 5)
    b.record(T0 + 3, 3)  # older, in window
    assert b.window_total == 8
    assert b.window_average(T0 + 5) == pytest.approx(8 / 3)  # span 3..5


def test_gap_of_a_whole_window_resets_first_write():
    b = TimedBuckets(window=5.0)
    b.record(T0, 100)
    b.record(T0 + 7, 2)  # 7 >= 5: reset
    assert b.window_total == 2
    assert b.window_average(T0 + 7) == 2.0  # undiluted


def test_is_empty():
    b = TimedBuckets(window=5.0)
    assert b.is_empty(T0)
    b.record(T0, 1)
    assert not b.is_empty(T0 + 5)
    assert b.is_empty(T0 + 6)


def test_resize_keeps_newest_buckets():
    # knative.md §2.3: 5 → 10 → 4 s keeps sums 20 → 20 → 27 → 22 and averages 4 → 4 → 4.5 → 5.5
    b = TimedBuckets(window=5.0)
    for i, v in enumerate([1, 2, 3, 4, 5, 6]):
        b.record(T0 + i, v)
    now = T0 + 5
    assert (b.window_total, b.window_average(now)) == (20, 4)
    b.resize(now, 10.0)
    assert b.size == 10
    assert (b.window_total, b.window_average(now)) == (20, 4)
    now += 1
    b.record(now, 7)
    assert (b.window_total, b.window_average(now)) == (27, 4.5)
    b.resize(now, 4.0)
    assert b.size == 4
    assert (b.window_total, b.window_average(now)) == (22, 5.5)


def test_resize_after_idle_clears():
    b = five_second_window()
    b.resize(T0 + 100, 10.0)
    assert b.window_total == 0
    assert b.window_average(T0 + 100) == 0


def test_resize_to_same_window_is_a_noop():
    b = five_second_window()
    b.resize(T0 + 4, 5.0)
    assert b.window_average(T0 + 4) == 3.0


def test_non_unit_granularity_ring_size():
    assert TimedBuckets(window=5.0, granularity=3.0).size == 2
    assert TimedBuckets(window=60.0).size == 60


@pytest.mark.parametrize("bad", [(0.5, 1.0), (5.0, 0.0)])
def test_invalid_window(bad):
    with pytest.raises(ValueError, match=r"granularity|window"):
        TimedBuckets(*bad)


@pytest.mark.parametrize(("n", "m"), [(5, 0.841511), (6, 0.78456), (40, 0.20567), (60, 0.2), (600, 0.2)])
def test_smoothing_coefficient(n, m):
    assert smoothing_coefficient(n) == pytest.approx(m, abs=1e-5)


def test_weighted_single_value_is_two_m():
    b = WeightedBuckets(window=5.0)
    b.record(T0, 2)
    assert b.window_average(T0) == pytest.approx(2 * b.smoothing)


def test_weighted_series_vector():
    b = WeightedBuckets(window=5.0)
    for i, v in enumerate([2, 3, 4, 5, 6]):
        b.record(T0 + i, v)
    assert b.window_average(T0 + 4) == pytest.approx(5.812, abs=1e-3)


def test_weighted_decays_with_trailing_zeros_and_empties():
    b = WeightedBuckets(window=5.0)
    b.record(T0, 10)
    m = b.smoothing
    assert b.window_average(T0 + 2) == pytest.approx(10 * m * (1 - m) ** 2)
    assert b.window_average(T0 + 6) == 0.0


def test_weighted_resize_updates_smoothing():
    b = WeightedBuckets(window=5.0)
    b.record(T0, 1)
    b.resize(T0, 60.0)
    assert b.smoothing == 0.2


def test_max_window_capacity():
    assert MaxTimeWindow(300.0).capacity == 150


def test_max_window_example_expiry():
    # knative.md §2.5: 4 pods at t=2 s still count at t=300 s and are gone at t=302 s
    w = MaxTimeWindow(300.0)
    w.record(2.0, 4)
    w.record(300.0, 1)
    assert w.current() == 4
    w.record(302.0, 1)
    assert w.current() == 1


def test_max_window_same_slot_keeps_larger():
    w = MaxTimeWindow(10.0)
    w.record(4.0, 5)
    w.record(5.0, 3)  # same 2 s slot
    assert w.current() == 5
    w.record(20.0, 2)
    assert w.current() == 2


def test_max_window_tracks_running_max():
    w = MaxTimeWindow(6.0)
    values = [1, 5, 2, 2, 1, 0, 0]
    seen = []
    for i, v in enumerate(values):
        w.record(i * 2.0, v)
        seen.append(w.current())
    # window of 3 slots
    expected = [max(values[max(0, i - 2) : i + 1]) for i in range(len(values))]
    assert seen == expected


def test_max_window_empty_is_zero():
    assert MaxTimeWindow(4.0).current() == 0
    assert math.isclose(MaxTimeWindow(4.0).current(), 0.0)
