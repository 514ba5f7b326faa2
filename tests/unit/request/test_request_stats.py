"""Knative's time-weighted request statistics (spec/knative.md §3.2): its vectors, pinned."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal.scaling.request_stats import RequestStats


def test_one_request_for_the_whole_second_is_one():
    s = RequestStats(0.0)
    s.enter(0.0)
    stat = s.report(1.0)
    assert stat.average_concurrency == 1.0 and stat.requests_per_second == 1.0


def test_a_request_for_three_seconds_of_six_is_a_half():
    s = RequestStats(0.0)
    s.enter(0.0)
    s.leave(3.0)
    stat = s.report(6.0)
    assert stat.average_concurrency == 0.5
    assert stat.requests_per_second == pytest.approx(1 / 6)


def test_two_overlapping_requests_give_one_and_a_half():
    s = RequestStats(0.0)
    s.enter(0.0)
    s.enter(0.1)
    s.leave(0.6)
    s.leave(1.0)
    assert s.report(1.0).average_concurrency == pytest.approx(1.5)


def test_a_request_spanning_reports_counts_in_each_period():
    s = RequestStats(0.0)
    s.enter(0.0)
    values = [s.report(t).average_concurrency for t in (1.0, 2.0, 3.0)]
    s.leave(3.5)
    values.append(s.report(4.0).average_concurrency)
    assert values == [1.0, 1.0, 1.0, 0.5]


def test_proxied_requests_count_in_both_figures():
    s = RequestStats(0.0)
    s.enter(0.0, proxied=True)
    s.enter(0.0)
    stat = s.report(1.0)
    assert stat.average_concurrency == 2.0 and stat.average_proxied_concurrency == 1.0
    assert stat.requests_per_second == 2.0 and stat.proxied_requests_per_second == 1.0


def test_a_clock_that_goes_back_is_ignored():
    s = RequestStats(10.0)
    s.enter(10.0)
    s.leave(9.0)  # earlier than the last event: no negative time is accumulated
    assert s.report(11.0).average_concurrency == 0.0


@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 10)), max_size=30))
def test_average_concurrency_stays_between_zero_and_the_peak(spans):
    events = sorted([(a, 1) for a, _ in spans] + [(a + b, -1) for a, b in spans], key=lambda e: (e[0], -e[1]))
    s = RequestStats(0.0)
    live = peak = 0
    for t, step in events:
        if step > 0:
            s.enter(t)
        else:
            s.leave(t)
        live += step
        peak = max(peak, live)
    stat = s.report(25.0)
    assert 0.0 <= stat.average_concurrency <= peak + 1e-9
