"""Load shapes: rates as documented, totals the exact integral, never decreasing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidal.spec import LoadShape, Shape


def test_constant():
    s = LoadShape(Shape.CONSTANT, rate=100)
    assert s.rate_at(5) == 100 and s.total(10) == 1000


def test_step():
    s = LoadShape(Shape.STEP, rate=10, peak=100, at=5)
    assert (s.rate_at(4.9), s.rate_at(5)) == (10, 100)
    assert s.total(10) == 50 + 500


def test_ramp():
    s = LoadShape(Shape.RAMP, rate=0, peak=100, at=10, duration=10)
    assert (s.rate_at(10), s.rate_at(15), s.rate_at(25)) == (0, 50, 100)
    assert s.total(20) == 500  # the ramp's triangle
    assert s.total(30) == 1500


def test_square_and_bursty():
    sq = LoadShape(Shape.SQUARE, rate=0, peak=10, period=4)
    assert [sq.rate_at(t) for t in (0, 1.9, 2, 3.9, 4)] == [10, 10, 0, 0, 10]
    assert sq.total(8) == 40
    b = LoadShape(Shape.BURSTY, rate=1, peak=101, period=10, duration=1)
    assert b.total(10) == 101 + 9


def test_at_delays_the_square_and_bursty_patterns_a_step_up_and_back():
    step = LoadShape(Shape.BURSTY, rate=225, peak=900, at=60, duration=120, period=1e6)
    assert [step.rate_at(t) for t in (0, 59.9, 60, 179.9, 180, 239)] == [225, 225, 900, 900, 225, 225]
    assert step.total(240) == 225 * 120 + 900 * 120
    sq = LoadShape(Shape.SQUARE, rate=0, peak=10, period=4, at=3)
    assert [sq.rate_at(t) for t in (0, 2.9, 3, 4.9, 5, 7)] == [0, 0, 10, 10, 0, 10]


def test_sine_oscillates_between_rate_and_peak():
    s = LoadShape(Shape.SINE, rate=10, peak=30, period=60)
    assert s.rate_at(0) == pytest.approx(10) and s.rate_at(30) == pytest.approx(30)
    assert s.total(60) == 1200  # the mean is (10 + 30) / 2


def test_nothing_before_the_start():
    assert LoadShape(rate=100).total(-5) == 0 and LoadShape(rate=100).rate_at(-1) == 0


shapes = st.builds(
    LoadShape,
    shape=st.sampled_from(list(Shape)),
    rate=st.floats(0, 1e4),
    peak=st.floats(0, 1e4),
    at=st.floats(0, 100),
    duration=st.floats(0, 100),
    period=st.floats(0.5, 100),
)


@settings(max_examples=200, deadline=None)
@given(shapes, st.lists(st.floats(0, 300), min_size=2, max_size=20))
def test_totals_never_decrease(shape, times):
    totals = [shape.total(t) for t in sorted(times)]
    assert totals == sorted(totals)


@settings(max_examples=100, deadline=None)
@given(shapes, st.floats(1, 200))
def test_total_is_the_integral_of_the_rate(shape, t):
    steps = 4000
    dt = t / steps
    numeric = sum(shape.rate_at((i + 0.5) * dt) for i in range(steps)) * dt
    # Discontinuous shapes (step, square, bursty) cost the midpoint rule one jump per edge.
    edges = 2 + 2 * t / shape.period
    tolerance = max(shape.rate, shape.peak) * dt * edges + 1e-6 * numeric + 1e-6
    assert shape.integral(t) == pytest.approx(numeric, abs=tolerance)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(list(Shape)),
    st.floats(0, 500),
    st.floats(1, 500),
    st.integers(1, 20_000),
)
def test_a_message_falls_due_exactly_when_the_total_first_reaches_its_number(shape, rate, peak, n):
    s = LoadShape(shape, rate=rate, peak=peak, at=5, duration=7, period=30)
    t = s.due_at(n)
    if t == math.inf:  # a shape that stays below n (rate 0 where it counts) never gets there
        assert s.total(1e6) < n
        return
    assert s.total(t + 1e-5) >= n
    assert s.total(max(0.0, t - 1e-5)) < n or t < 1e-5
