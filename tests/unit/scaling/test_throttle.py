"""Numaflow's rate limiter as Tidal runs it: the budget ramps from min to max by the mode's rule,
any window of n seconds admits at most n seconds of budget, and the autoscaler's guard stops at
what the limit lets through while still honouring min."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidal.scaling import NumaflowScale, Rule, decide
from tidal.scaling.throttle import RateLimit, RateLimitMode, Throttle, ceiling
from tidal.spec import parse_pipeline

from .conftest import NOW, udf


def per_second(throttle: Throttle, seconds: int, start: float = 1000.0, ask: int = 10_000) -> list[int]:
    """What asking at every trigger (0.25 s) for ``ask`` gets, summed per whole second."""
    out = []
    for s in range(seconds):
        out.append(sum(throttle.acquire(start + s + k / 4, ask) for k in range(4)))
    return out


def test_relaxed_ramps_from_min_to_max_by_the_slope_each_second():
    throttle = Throttle(RateLimit(max=100, min=10, ramp_up_seconds=3))
    assert per_second(throttle, 6) == [10, 40, 70, 100, 100, 100]


def test_relaxed_pauses_its_ramp_while_nobody_asks_and_scheduled_does_not():
    relaxed = Throttle(RateLimit(max=100, min=10, ramp_up_seconds=9))  # slope 10/s
    scheduled = Throttle(RateLimit(max=100, min=10, ramp_up_seconds=9, mode=RateLimitMode.SCHEDULED))
    for t in (throttle for throttle in (relaxed, scheduled)):
        t.acquire(1000.0, 1)
        t.acquire(1005.0, 1)  # five silent seconds
    assert (relaxed.filled, scheduled.filled) == (20, 60)


def test_only_if_used_grows_only_after_a_busy_second():
    throttle = Throttle(RateLimit(max=100, min=20, ramp_up_seconds=80, mode=RateLimitMode.ONLY_IF_USED))
    throttle.acquire(1000.0, 2)  # 10 % of 20 used, + 5 % (slope 1 over 20: Numaflow's allowance)
    throttle.acquire(1001.0, 1000)
    assert throttle.filled == 20
    throttle.acquire(1002.0, 1)  # the second before used all of it
    assert throttle.filled == 21


def test_go_back_n_ramps_down_after_a_pause_longer_than_its_cool_down():
    spec = RateLimit(max=100, min=10, ramp_up_seconds=9, mode=RateLimitMode.GO_BACK_N, cool_down_seconds=5)
    throttle = Throttle(spec)
    for s in range(9):
        throttle.acquire(1000.0 + s, 1000)  # busy: up by 10 each second
    assert throttle.filled == 90
    throttle.acquire(1020.0, 1000)  # 12 s after the last ask: down by 50 % × 10 × (12 − 1)
    assert throttle.filled == 35


@settings(max_examples=200)
@given(
    st.lists(st.tuples(st.floats(0.01, 1.5), st.integers(0, 500)), min_size=1, max_size=120),
    st.sampled_from(list(RateLimitMode)),
)
def test_no_window_of_ten_seconds_admits_more_than_ten_seconds_of_max(asks, mode):
    spec = RateLimit(max=100, min=30, ramp_up_seconds=2, mode=mode)
    throttle, now, admitted = Throttle(spec), 1000.0, []
    for gap, wanted in asks:
        now += gap
        admitted.append((now, throttle.acquire(now, wanted)))
    for start, _ in admitted:
        assert sum(n for t, n in admitted if start <= t < start + 10) <= 10 * spec.max


def test_tokens_taken_and_not_used_go_back_and_a_pool_multiplies_the_budget():
    throttle = Throttle(RateLimit(max=50, min=50))
    assert throttle.acquire(1000.0, 40) == 40
    throttle.give_back(1000.0, 30)  # only 10 messages were there
    assert throttle.acquire(1000.5, 100) == 40
    per_replica = Throttle(RateLimit(max=50, min=50))
    assert per_replica.acquire(1000.0, 1000, pool=3) == 150


def test_the_ceiling_is_the_ramp_capped_at_max():
    spec = RateLimit(max=100, min=10, ramp_up_seconds=9)
    assert [ceiling(spec, t) for t in (0, 3, 9, 60)] == [10, 40, 100, 100]


def test_the_guard_holds_at_the_limit_but_still_brings_a_vertex_up_to_min():
    at_limit = udf(pending=20_000, rate=100, rate_limit_max=100)
    assert decide(NumaflowScale(), at_limit, NOW).rule == Rule.RATE_LIMITED
    d = decide(NumaflowScale(min=3, max=10), udf(pending=20_000, rate=100, rate_limit_max=100), NOW)
    assert (d.rule, d.desired) == (Rule.INTO_BOUNDS, 3)  # min, and no more (numaflow #3411)


def _pipeline(limits: dict, vertex: dict | None = None) -> dict:
    source = {"name": "in", "source": {"generator": {"rate": 1}}, **(vertex or {})}
    return {
        "name": "p",
        "limits": limits,
        "vertices": [source, {"name": "out", "sink": {"log": {}}}],
        "edges": [{"from": "in", "to": "out"}],
    }


def test_a_vertex_limit_wins_and_the_pipelines_applies_to_the_rest():
    spec = parse_pipeline(
        _pipeline({"rateLimit": {"max": 100, "min": 10}}, {"limits": {"rateLimit": {"max": 40}}})
    )
    assert (spec.rate_limit("in").max, spec.rate_limit("out").max) == (40, 100)


@pytest.mark.parametrize(
    ("limits", "vertex", "message"),
    [
        ({"rateLimit": {"max": 10, "min": 20}}, None, r"limits\.rateLimit: min \(20\) exceeds max \(10\)"),
        ({"rateLimit": {"max": 0}}, None, r"limits\.rateLimit\.max"),
        ({"rateLimit": {"max": 10, "mode": "sometimes"}}, None, r"limits\.rateLimit\.mode"),
        (
            {},
            {"source": {"http": {}}, "limits": {"rateLimit": {"max": 10}}},
            "an HTTP source is not read in batches",
        ),
    ],
)
def test_bad_rate_limits_are_refused_naming_the_field(limits, vertex, message):
    with pytest.raises(Exception, match=message):
        parse_pipeline(_pipeline(limits, vertex))


def test_floors_are_whole_messages():
    throttle = Throttle(RateLimit(max=10.5, min=10.5))
    assert throttle.acquire(1000.0, 100) == math.floor(10.5)


def test_a_vertex_its_limit_held_back_is_not_scaled_up_whatever_its_rate():
    pending = udf(pending=20_000, rate=5)  # far behind, at a rate well under any limit
    assert decide(NumaflowScale(), pending, NOW).rule == Rule.SCALE_UP
    held = decide(NumaflowScale(), udf(pending=20_000, rate=5, throttled=True), NOW)
    assert held.rule == Rule.RATE_LIMITED and "held back by the rate limit" in held.reason
    low = decide(NumaflowScale(min=3, max=9), udf(pending=20_000, rate=5, throttled=True), NOW)
    assert (low.rule, low.desired) == (Rule.INTO_BOUNDS, 3)
