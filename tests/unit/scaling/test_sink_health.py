"""A failing sink is not scaled up (rule ``sink-failing``): the share of its writes retried over
the lookback, from cumulative counters, and the Numaflow rule that holds on it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidal.controller.policy import NumaflowPolicy
from tidal.scaling import NumaflowScale, Rule, decide
from tidal.scaling.sink_health import FAILING_SHARE, SinkHealth

from .conftest import NOW, udf

SCALE = NumaflowScale(lookback_seconds=60)


def test_the_share_is_retried_over_all_attempts_within_the_lookback():
    health = SinkHealth()
    health.record(0, 0, 0)
    health.record(100, 10_000, 0)  # a healthy sink, long ago
    health.record(130, 10_600, 400)
    health.record(160, 11_200, 800)  # 1,200 written and 800 retried in the last 60 s
    assert health.retried_share(160, 60) == 800 / 2000


@given(st.lists(st.tuples(st.floats(0, 1e4), st.floats(0, 1e4)), min_size=2, max_size=30))
def test_the_share_is_a_fraction_or_unknown(steps: list[tuple[float, float]]):
    health, processed, retried = SinkHealth(), 0.0, 0.0
    for t, (p, r) in enumerate(steps):
        processed, retried = processed + p, retried + r
        health.record(float(t), processed, retried)
    share = health.retried_share(float(len(steps)), 5)
    assert share is None or 0 <= share <= 1


def test_counters_that_go_back_start_a_new_window():
    health = SinkHealth()
    health.record(0, 5000, 900)
    health.record(10, 10, 0)  # a new run directory
    assert health.retried_share(10, 60) is None


def test_a_failing_sink_is_held_where_numaflow_would_scale_it_up():
    growing = udf(pending=20_000, rate=100)
    assert decide(SCALE, growing, NOW).rule == Rule.SCALE_UP  # Numaflow's rule alone
    d = decide(SCALE, udf(pending=20_000, rate=100, sink_retried_share=0.4), NOW)
    assert d.rule == Rule.SINK_FAILING and d.desired == 2
    assert "40% of writes retried" in d.reason and "more replicas would not help" in d.reason


def test_below_the_share_or_scaling_down_a_failing_sink_is_as_usual():
    quiet = decide(SCALE, udf(pending=20_000, rate=100, sink_retried_share=FAILING_SHARE / 2), NOW)
    assert quiet.rule == Rule.SCALE_UP
    idle = decide(SCALE, udf(pending=10, rate=100, replicas=5, ready_replicas=5, sink_retried_share=0.9), NOW)
    assert idle.rule == Rule.SCALE_DOWN


def test_below_min_a_failing_sink_still_goes_to_min():
    d = decide(NumaflowScale(min=4, max=10), udf(pending=20_000, rate=100, sink_retried_share=0.9), NOW)
    assert d.rule == Rule.INTO_BOUNDS and d.desired == 4


def test_the_policy_turns_the_runtimes_counters_into_the_hold():
    from tidal.controller.policy import PolicyInput
    from tidal.scaling import PressureCheck, VertexKind

    policy = NumaflowPolicy(SCALE)

    def view(now: float, processed: float, retried: float) -> PolicyInput:
        return PolicyInput(
            "out", VertexKind.SINK, now, 2, 2, processed, 20_000, 10.0, 100.0, 20_000.0, 0.0,
            PressureCheck.none(), 0.0, 30_000, 0.8, 500, sink_retried=retried,
        )  # fmt: skip

    assert policy.decide(view(NOW - 30, 1000, 0)).rule != Rule.SINK_FAILING  # one sample: unknown
    assert policy.decide(view(NOW, 4000, 2000)).rule == Rule.SINK_FAILING
