"""Delivery-delay samples: exact where they keep points, pooled by counts, histogram buckets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidal.scaling.latency import (
    BUCKETS,
    POINTS,
    DelaySample,
    bucket_counts,
    delays_at,
    pooled,
    quantile,
    time_sample,
)


def test_a_sample_keeps_every_percentile_of_the_source_times_and_leaves_out_unknown_ones():
    times = [float(i) for i in range(1001)] + [math.nan]
    sample = time_sample(times)
    assert sample.count == 1001
    assert len(sample.points) == POINTS
    assert sample.points[0] == 0.0 and sample.points[50] == 500.0 and sample.points[-1] == 1000.0
    assert time_sample([]).count == 0 and time_sample([math.nan]).count == 0


def test_delays_are_now_minus_source_time_in_ascending_order_and_never_negative():
    sample = time_sample([100.0, 101.0, 109.0, 111.0])
    delays = delays_at([sample], now=110.0)
    assert delays.count == 4
    assert delays.points[0] == 0.0  # 111 is in the future of 110: no delay, not a negative one
    assert delays.max == 10.0
    assert list(delays.points) == sorted(delays.points)


def test_two_tasks_pool_by_their_counts_not_by_their_samples():
    big = time_sample([0.0] * 990)  # 990 messages 10 s old
    small = time_sample([9.0] * 10)  # 10 messages 1 s old
    delays = delays_at([big, small], now=10.0)
    assert delays.count == 1000
    assert delays.p50 == 10.0
    assert quantile([delays], 0.005) == 1.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1000, allow_nan=False), min_size=1, max_size=400),
    st.lists(st.floats(0, 1000, allow_nan=False), min_size=1, max_size=400),
    st.floats(0.01, 0.99),
)
def test_pooled_quantiles_are_within_a_percent_of_rank_of_the_exact_ones(a, b, q):
    now = 2000.0
    samples = [delays_at([time_sample(a)], now), delays_at([time_sample(b)], now)]
    got = quantile([pooled(samples, now)], q)
    exact = np.sort(now - np.array(a + b))
    n = len(exact)
    # The rank of the value returned, counted both ways (ties), is within 1 % (+1 message) of q·n.
    below = int(np.searchsorted(exact, got - 1e-6, side="left"))
    upto = int(np.searchsorted(exact, got + 1e-6, side="right"))
    slack = 0.011 * n + 2
    assert below - slack <= q * n <= upto + slack


def test_the_histogram_counts_every_message_once_in_cumulative_buckets():
    sample = DelaySample(0.0, 200, tuple([0.02] * 50 + [0.7] * 51))
    cumulative, total, count = bucket_counts([sample])
    assert count == pytest.approx(200)
    assert cumulative[-1] == pytest.approx(200)
    assert cumulative[BUCKETS.index(0.05)] == pytest.approx(200 * 50 / 101)
    assert cumulative[BUCKETS.index(1.0)] == pytest.approx(200)
    assert total == pytest.approx(sum(p * 200 / 101 for p in sample.points))
    assert cumulative == sorted(cumulative)


def test_the_report_breaks_its_lines_over_spells_with_nothing_delivered():
    from tidal.observe.latency import WINDOW, _with_gaps

    points = [DelaySample(at, 10, (1.0,) * 101) for at in (105.0, 110.0, 200.0)]
    t, p50, _ = _with_gaps(points, 100.0)
    assert t == [5.0, 10.0, 10.0 + WINDOW, 100.0]
    assert math.isnan(p50[2]) and p50[3] == 1.0
