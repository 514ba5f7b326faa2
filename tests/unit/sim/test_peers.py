"""Each peer policy on a case worked by hand, and Tidal's KPA adapter."""

from __future__ import annotations

import math

from tidal.controller import KpaPolicy, PolicyInput
from tidal.scaling import KpaMetric, KpaSpec, Rule
from tidal.sim.peers import Ds2Policy, SparkDynamicAllocationPolicy, StaticPeakPolicy

from . import views


def view(
    now: float, replicas: int, processed: float, pending: float, busy: float, ready: int | None = None
) -> PolicyInput:
    return views.view("work", now, replicas, processed, pending, busy, ready=ready)


def test_static_peak_holds_its_count() -> None:
    policy = StaticPeakPolicy(7)
    d = policy.decide(view(5, 7, 0, 0, 0))
    assert (d.desired, d.rule, d.changed) == (7, Rule.STATIC_PEAK, False)
    assert policy.decide(view(6, 3, 0, 0, 0)).desired == 7


def steady(
    policy: Ds2Policy, *, seconds: int, replicas: int, rate: float, true_rate: float, lag: float = 0.0
):
    """``rate``/s arrive and are processed by ``replicas`` at ``true_rate`` per busy second; the
    first change, or the last hold."""
    d = None
    for t in range(seconds + 1):
        d = policy.decide(view(t, replicas, rate * t, lag, rate * t / true_rate))
        if d.changed:
            return d
    return d


def test_ds2_waits_for_a_full_metrics_window() -> None:
    policy = Ds2Policy(window_seconds=30, stabilization_seconds=0, restart_seconds=0)
    d = steady(policy, seconds=29, replicas=1, rate=700, true_rate=100)
    assert d.rule == Rule.DS2_HOLD and "collecting metrics: 29 s of a 30 s window" in d.reason
    assert policy.decide(view(30, 1, 700 * 30, 0, 7 * 30)).desired == 10


def test_ds2_sizes_for_target_utilization_plus_restart_catch_up() -> None:
    # 700/s at 100/s per busy replica: 700 / 0.7 = 1000/s needed, plus the records that pile up
    # during an 8 s restart caught up over 300 s: 700 × 8 / 300 = 18.7/s → 1018.7/s → 11.
    policy = Ds2Policy(stabilization_seconds=0, restart_seconds=8, catch_up_seconds=300)
    d = steady(policy, seconds=120, replicas=4, rate=700, true_rate=100)
    assert d.rule == Rule.DS2_RESCALE
    assert d.desired == math.ceil((700 / 0.7 + 700 * 8 / 300) / 100) == 11
    assert "target utilization 0.7 → 11" in d.reason


def test_ds2_adds_the_lag_over_the_catch_up_time() -> None:
    policy = Ds2Policy(stabilization_seconds=0, restart_seconds=0, catch_up_seconds=100)
    # utilization (140 + 8000 / 100) / (2 × 100) = 1.1: above the band
    d = steady(policy, seconds=120, replicas=2, rate=140, true_rate=100, lag=8000)
    assert d.desired == math.ceil((140 / 0.7 + 8000 / 100) / 100) == 3


def test_ds2_holds_inside_the_utilization_band_and_while_stabilizing() -> None:
    policy = Ds2Policy(stabilization_seconds=0, restart_seconds=0)
    d = steady(policy, seconds=120, replicas=10, rate=800, true_rate=100)  # utilization 0.8
    assert (d.rule, d.desired) == (Rule.DS2_HOLD, 10)
    assert "within [0.40, 1.00]" in d.reason
    waiting = Ds2Policy(window_seconds=10, stabilization_seconds=60, restart_seconds=0)
    d = steady(waiting, seconds=30, replicas=1, rate=800, true_rate=100)
    assert d.rule == Rule.DS2_HOLD and "stabilizing" in d.reason


def test_ds2_scales_down_by_at_most_the_max_factor() -> None:
    policy = Ds2Policy(stabilization_seconds=0, restart_seconds=0)
    d = steady(policy, seconds=120, replicas=20, rate=100, true_rate=100)  # needs 2, utilization 0.05
    assert d.desired == math.ceil(20 * 0.4) == 8
    assert "capped at 60%" in d.reason


def test_ds2_downstream_takes_the_upstream_target_rate() -> None:
    source = Ds2Policy(stabilization_seconds=0, restart_seconds=0)
    udf = Ds2Policy(stabilization_seconds=0, restart_seconds=0, upstream=(source,))
    for t in range(121):
        source.decide(view(t, 1, 700 * t, 0, 700 * t / 1000))
        # the UDF only sees 100/s get through (its upstream is throttled), but sizes for 700/s
        d = udf.decide(view(t, 1, 100 * t, 0, 100 * t / 100))
    assert d.desired == 10  # 700 / 0.7 / 100


def test_spark_adds_one_then_doubles_while_backlogged() -> None:
    policy = SparkDynamicAllocationPolicy(capacity=100, max_executors=50)
    replicas, added = 1, []
    for t in range(6):
        d = policy.decide(view(t, replicas, 0, 10_000, t * 1.0, ready=1))  # 100 tasks pending
        added.append(d.desired - replicas)
        replicas = d.desired
    assert added == [0, 1, 2, 4, 8, 16]  # the first request after the 1 s backlog timeout
    d = policy.decide(view(6, replicas, 0, 10_000, 6.0, ready=1))
    assert d.desired == 50 and d.rule == Rule.SPARK_BACKLOG  # capped at max (needed: 100)


def test_spark_never_asks_for_more_than_the_tasks_need() -> None:
    policy = SparkDynamicAllocationPolicy(capacity=100)
    replicas = 1
    for t in range(10):
        replicas = policy.decide(view(t, replicas, 0, 450, t * 1.0, ready=1)).desired
    assert replicas == 5  # ceil(450 / 100) tasks


def test_spark_removes_executors_idle_for_a_minute() -> None:
    policy = SparkDynamicAllocationPolicy(capacity=100, idle_timeout=60)
    # 6 executors, the work keeps 2 of them busy (200/s), no backlog.
    decisions = [policy.decide(view(t, 6, 200 * t, 0, 2.0 * t)) for t in range(62)]
    first = next(i for i, d in enumerate(decisions) if d.changed)
    assert first == 60  # observed from t=0: 4 executors idle for the full 60 s
    assert decisions[first].desired == 2 and decisions[first].rule == Rule.SPARK_IDLE


def test_kpa_policy_sizes_on_arrivals_per_second() -> None:
    spec = KpaSpec(metric=KpaMetric.RPS, target=250)  # 175/s per replica at 0.7
    policy = KpaPolicy(spec, "work", now=0.0, ready=1)
    d = None
    for t in range(0, 10):
        d = policy.decide(view(t, 1, 1000 * t, 0, 0))  # 1000/s arrive and are processed
    assert d is not None and d.desired == math.ceil(1000 / 175) == 6


def test_kpa_policy_wakes_from_zero_on_arrivals() -> None:
    spec = KpaSpec(metric=KpaMetric.RPS, target=250)
    policy = KpaPolicy(spec, "work", now=0.0, ready=0)
    d = None
    for t in range(0, 4):
        d = policy.decide(view(t, 0, 0, 100 * t, 0, ready=0))  # messages pile up at zero
    assert d is not None and d.desired >= 1
