"""Vertical recommendations (tidal.scaling.vertical): VPA's decaying histogram, ported with
upstream's own cases (decaying_histogram_test.go), and the recommender's bounds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal.scaling.vertical import (
    CPU_BUCKETS,
    MEMORY_BUCKETS,
    MIN_MEMORY,
    DecayingHistogram,
    VerticalRecommender,
    exponential_buckets,
    linear_buckets,
)

START = 1234567890.0  # upstream's startTime
HOUR = 3600.0
OPTIONS = linear_buckets(10.0, 1.0, 1e-15)  # upstream's testHistogramOptions


def decaying() -> DecayingHistogram:
    return DecayingHistogram(OPTIONS, half_life=HOUR)


def test_an_empty_histogram_answers_zero_for_every_percentile():  # TestPercentilesEmptyDecayingHistogram
    h = decaying()
    assert [h.percentile(p) for p in (-0.5, 0.0, 0.5, 1.0, 1.5)] == [0.0] * 5


def test_simple_decay():  # TestSimpleDecay
    h = decaying()
    h.add(2, 1000, START)
    h.add(1, 1, START + 20 * HOUR)  # 2^20 × 0.001 > 1000 times the first one's weight
    assert h.percentile(0.999) == pytest.approx(2) and h.percentile(1.0) == pytest.approx(3)


def test_longterm_decay():  # TestLongtermDecay: the reference moves past 2^maxDecayExponent
    h = decaying()
    h.add(2, 1, START)
    h.add(1, 1, START + 101 * HOUR)
    assert h.percentile(1.0) == pytest.approx(2)


@pytest.mark.parametrize(
    ("p", "value"),
    [(0.00, 2), (0.02, 2), (0.03, 3), (0.10, 3), (0.11, 4), (0.34, 4), (0.35, 5), (1.00, 5)],
)
def test_decaying_histogram_percentiles(p, value):  # TestDecayingHistogramPercentiles
    h = decaying()
    for i in range(1, 5):
        h.add(float(i), float(i), START + (i - 1) * HOUR)
    assert h.percentile(p) == pytest.approx(value)


@pytest.mark.parametrize(
    ("p", "value"),
    [
        (0.0, 2),
        (0.1, 2),
        (0.2, 3),
        (0.3, 3),
        (0.4, 4),
        (0.5, 4),
        (0.6, 4),
        (0.7, 5),
        (0.8, 5),
        (0.9, 5),
        (1.0, 5),
    ],
)
def test_no_decay_at_a_fixed_time(p, value):  # TestNoDecay
    h = decaying()
    for i in range(1, 5):
        h.add(float(i), float(i), START)
    assert h.percentile(p) == pytest.approx(value)


def test_upstreams_bucket_schemes():
    assert MEMORY_BUCKETS.start(1) == pytest.approx(1e7) and CPU_BUCKETS.start(1) == pytest.approx(0.01)
    b = exponential_buckets(100.0, 1.0, 2.0)  # 1, 3, 7, 15, 31, 63, 127: 7 boundaries above 0
    assert [b.start(i) for i in range(b.count)] == [0, 1, 3, 7, 15, 31, 63, 127]
    assert [b.find(v) for v in (0.5, 1, 2.9, 3, 100, 1e9)] == [0, 1, 1, 2, 6, b.count - 1]


@given(st.lists(st.floats(1e6, 1e10), min_size=1, max_size=50), st.floats(0.0, 1.0))
def test_a_percentile_bounds_its_share_of_the_samples(values, p):
    h = DecayingHistogram(MEMORY_BUCKETS)
    for v in values:
        h.add(v, 1.0, START)
    got = h.percentile(p)
    below = sum(1 for v in values if v < got)
    assert below >= p * len(values) - 1e-9 or got >= max(values)


def test_the_recommendation_is_the_90th_percentile_with_a_margin_and_bounds_that_narrow_with_history():
    r = VerticalRecommender()
    assert r.recommend() is None
    for t in range(0, 600, 5):  # 10 minutes of tasks of 400-460 MB, 0.5 cores
        r.observe(START + t, 400e6 + (t % 60) * 1e6, 0.5)
    young = r.recommend()
    assert young is not None and young.samples == 120
    assert 460e6 <= young.memory.target <= 460e6 * 1.15 * 1.06  # p90 of the minute peaks × 1.15
    assert young.memory.lower <= young.memory.target <= young.memory.upper
    assert young.cpu.target == pytest.approx(0.5 * 1.15, rel=0.06)
    for t in range(600, 6 * 3600, 5):  # six hours of the same
        r.observe(START + t, 400e6 + (t % 60) * 1e6, 0.5)
    old = r.recommend()
    assert old is not None
    assert old.memory.upper < young.memory.upper  # more history: a tighter upper bound
    assert old.memory.upper / old.memory.target < 2


def test_floors_are_upstreams_minimums():
    r = VerticalRecommender()
    r.observe(START, 1e6, 0.001)
    rec = r.recommend()
    assert rec is not None and rec.memory.target == MIN_MEMORY and rec.cpu.target == 0.025


def test_the_lines_show_bounds_only_once_ten_minutes_back_them():
    from tidal.observe.vertical import vertical_lines

    r = VerticalRecommender()
    for t in range(0, 120, 5):
        r.observe(START + t, 300e6, 0.5)
    young = r.recommend()
    assert young is not None
    (line,) = vertical_lines([{"name": "enrich", "vertical": young.to_dict()}])
    assert line.startswith("enrich: memory") and "bounds after 10 min" in line and "upper" not in line
    for t in range(120, 900, 5):
        r.observe(START + t, 300e6, 0.5)
    old = r.recommend()
    assert old is not None
    (line,) = vertical_lines(
        [{"name": "enrich", "vertical": old.to_dict()}, {"name": "gen", "vertical": None}]
    )
    assert "upper" in line and "lower" in line
