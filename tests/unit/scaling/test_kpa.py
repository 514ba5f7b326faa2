"""Knative's KPA: target resolution, the decider (knative.md §1.4), EBC and the zero gate (§1.6)."""

from __future__ import annotations

import pytest

from tidal.errors import SpecError
from tidal.scaling import (
    Aggregation,
    KpaDecider,
    KpaMetric,
    KpaScaler,
    KpaSpec,
    Rule,
    activator_count,
    initial_excess_burst_capacity,
)

T0 = 1_000_000.0


def feed(decider: KpaDecider | KpaScaler, start: float, seconds: int, value: float) -> float:
    for i in range(seconds):
        decider.record(start + i, value)
    return start + seconds - 1


# -- spec -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "total", "target"),
    [
        pytest.param(KpaSpec(), 100, 70, id="defaults"),
        pytest.param(KpaSpec(container_concurrency=10), 10, 7, id="cc-10"),
        pytest.param(KpaSpec(metric=KpaMetric.RPS), 200, 140, id="rps"),
        pytest.param(KpaSpec(metric=KpaMetric.RPS, target=300), 300, 210, id="rps-target"),
        pytest.param(KpaSpec(target=50), 50, 35, id="target-annotation"),
        pytest.param(KpaSpec(target=50, container_concurrency=20), 20, 14, id="target-capped-at-cc"),
        pytest.param(
            KpaSpec.from_knative(annotations={"target-utilization-percentage": 50}),
            100,
            50,
            id="annotation-50",
        ),
        pytest.param(
            KpaSpec.from_knative({"container-concurrency-target-percentage": 50}), 100, 50, id="config-50"
        ),
        pytest.param(KpaSpec.per_replica(target=30, total=40), 40, 30, id="per-replica"),
        pytest.param(KpaSpec(target=0.01, target_utilization=0.5), 0.01, 0.01, id="floor-0.01"),
    ],
)
def test_target_resolution(spec, total, target):
    assert spec.total_value == pytest.approx(total)
    assert spec.target_value == pytest.approx(target)


@pytest.mark.parametrize(
    ("window", "pct", "panic"), [(60, 10, 6), (60, 51, 31), (10, 10, 1), (600, 10, 60), (6, 1, 1)]
)
def test_panic_window(window, pct, panic):
    assert KpaSpec(stable_window=window, panic_window_percentage=pct).panic_window == panic


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"target_utilization": 0}, "kpa.targetUtilization"),
        ({"container_concurrency": 1001}, "kpa.containerConcurrency"),
        ({"target": 0.001}, "kpa.target"),
        ({"target_burst_capacity": -2}, "kpa.targetBurstCapacity"),
        ({"stable_window": 5}, "kpa.stableWindow"),
        ({"stable_window": 60.5}, "kpa.stableWindow"),
        ({"panic_window_percentage": 0}, "kpa.panicWindowPercentage"),
        ({"panic_threshold_percentage": 100}, "kpa.panicThresholdPercentage"),
        ({"max_scale_up_rate": 1}, "kpa.maxScaleUpRate"),
        ({"max_scale_down_rate": 1}, "kpa.maxScaleDownRate"),
        ({"scale_to_zero_grace_period": 0}, "kpa.scaleToZeroGracePeriod"),
        ({"scale_down_delay": 3601}, "kpa.scaleDownDelay"),
        ({"initial_scale": 0}, "kpa.initialScale"),
        ({"min_scale": 5, "max_scale": 2}, "kpa.maxScale"),
        ({"activation_scale": 5, "max_scale": 3}, "kpa.activationScale"),
    ],
)
def test_invalid_spec_names_the_field(kwargs, path):
    with pytest.raises(SpecError) as err:
        KpaSpec(**kwargs)
    assert err.value.path == path


def test_zero_initial_scale_allowed_when_asked():
    assert KpaSpec(initial_scale=0, allow_zero_initial_scale=True).initial_scale == 0


# -- decider -----------------------------------------------------------------------------------


def test_no_data_is_an_invalid_result_not_an_error():
    r = KpaDecider("svc", KpaSpec(), T0).scale(T0, ready=1, current=1)
    assert not r.valid
    assert (r.decision.rule, r.decision.desired) == (Rule.KPA_NO_DATA, 1)


def test_lister_error_is_invalid():
    d = KpaDecider("svc", KpaSpec(), T0)
    feed(d, T0, 5, 10)
    assert not d.scale(T0 + 5, ready=None, current=2).valid


def test_tbc_minus_one_has_no_scrape_target_so_empty_is_zero_not_no_data():
    r = KpaDecider("svc", KpaSpec(target_burst_capacity=-1), T0).scale(T0, ready=1, current=1)
    assert r.valid and r.decision.desired == 0
    assert r.excess_burst_capacity == -1


def test_float_ceil_trap_21_over_0_7_is_31():
    spec = KpaSpec(target=1, target_utilization=0.7)
    d = KpaDecider("svc", spec, T0)
    now = feed(d, T0, 60, 21)
    r = d.scale(now, ready=31, current=31)
    assert r.decision.desired == 31


def test_stable_mode_desired_is_ceil_of_total_over_target():
    d = KpaDecider("svc", KpaSpec(), T0)
    now = feed(d, T0, 60, 150)  # 150 / 70 → 3
    r = d.scale(now, ready=2, current=2)
    assert (r.decision.desired, r.decision.rule, r.panicking) == (3, Rule.KPA_STABLE, False)
    assert "stable: concurrency 150 over 60 s / target 70 → 3" in r.decision.reason


def test_rate_limit_down_halves_at_most():
    d = KpaDecider("svc", KpaSpec(), T0, ready=0)
    now = feed(d, T0, 60, 1)
    r = d.scale(now, ready=10, current=10)
    assert r.decision.desired == 5  # floor(10 / 2)
    assert "rate-limited" in r.decision.reason


def test_last_pod_can_go_in_one_step():
    d = KpaDecider("svc", KpaSpec(), T0)
    d.record(T0, 0)
    assert d.scale(T0, ready=1, current=1).decision.desired == 0


def test_rate_limit_up():
    d = KpaDecider("svc", KpaSpec(max_scale_up_rate=2, stable_window=6), T0)
    now = feed(d, T0, 6, 7000)
    r = d.scale(now, ready=3, current=3)
    assert r.decision.desired == 6  # ceil(2 × 3)


def test_unreachable_has_no_max_down():
    d = KpaDecider("svc", KpaSpec(reachable=False), T0)
    now = feed(d, T0, 60, 70)
    assert d.scale(now, ready=10, current=10).decision.desired == 1


def test_panic_entry_and_no_scale_down_while_panicking():
    d = KpaDecider("svc", KpaSpec(), T0, ready=1)
    now = feed(d, T0, 60, 10)  # calm: 1 pod
    assert not d.scale(now, ready=1, current=1).panicking
    now = feed(d, now + 1, 6, 700)  # panic window 700/70 = 10 pods ≥ 2 × 1
    r = d.scale(now, ready=1, current=1)
    assert r.panicking and r.decision.rule == Rule.KPA_PANIC
    high = r.decision.desired
    assert high >= 10
    now = feed(d, now + 1, 6, 10)  # load falls, still within a stable window of the last over tick
    r = d.scale(now, ready=high, current=high)
    assert r.panicking and r.decision.desired == high


def test_panic_exits_strictly_after_a_stable_window_since_last_over_tick():
    spec = KpaSpec(stable_window=10)  # panic window 1 s
    d = KpaDecider("svc", spec, T0, ready=1)
    d.record(T0, 700)
    assert d.scale(T0, ready=1, current=1).panicking  # over the threshold at T0
    for t in range(1, 11):  # under the threshold, but T0 + 10 < t is not yet true
        d.record(T0 + t, 0)
        assert d.scale(T0 + t, ready=1, current=1).panicking, t
    d.record(T0 + 11, 0)
    assert not d.scale(T0 + 11, ready=1, current=1).panicking


def test_start_in_panic_with_more_than_one_ready():
    d = KpaDecider("svc", KpaSpec(), T0, ready=5)
    d.record(T0, 1)
    r = d.scale(T0, ready=5, current=5)
    assert r.panicking and r.decision.desired == 5  # high-water mark = ready at creation


def test_start_calm_with_one_ready():
    d = KpaDecider("svc", KpaSpec(), T0, ready=1)
    d.record(T0, 1)
    assert not d.scale(T0, ready=1, current=1).panicking


def test_panic_trigger_uses_unclamped_demand_over_ready():
    d = KpaDecider("svc", KpaSpec(max_scale_up_rate=1.5), T0, ready=1)
    now = feed(d, T0, 6, 1400)  # dppc 20 ≥ 2 × 1 even though maxUp clamps to 2
    r = d.scale(now, ready=1, current=1)
    assert r.panicking and r.decision.desired == 2


def test_activation_scale_after_clamp_and_only_with_demand():
    spec = KpaSpec(activation_scale=3)
    d = KpaDecider("svc", spec, T0)
    now = feed(d, T0, 60, 1)
    assert d.scale(now, ready=0, current=0).decision.desired == 3
    d2 = KpaDecider("svc", spec, T0)
    now = feed(d2, T0, 60, 0)
    assert d2.scale(now, ready=0, current=0).decision.desired == 0


def test_scale_down_delay_holds_the_window_max():
    spec = KpaSpec(scale_down_delay=10)
    d = KpaDecider("svc", spec, T0)
    d.record(T0, 350)  # 5 pods; 5 / 3 ready is below the panic threshold
    assert d.scale(T0, ready=3, current=3).decision.desired == 5
    for i in range(1, 70):
        d.record(T0 + i, 0)
    r = d.scale(T0 + 8, ready=5, current=5)
    assert r.decision.desired == 5 and r.decision.rule == Rule.KPA_SCALE_DOWN_DELAY
    r = d.scale(T0 + 12, ready=5, current=5)
    assert r.decision.desired < 5


def test_update_rebuilds_delay_window():
    d = KpaDecider("svc", KpaSpec(), T0)
    d.update(KpaSpec(scale_down_delay=30), T0)
    d.record(T0, 350)
    d.scale(T0, ready=1, current=1)
    d.record(T0 + 2, 0)
    assert d.scale(T0 + 2, ready=5, current=5).decision.desired == 5


def test_update_resizes_windows():
    d = KpaDecider("svc", KpaSpec(), T0)
    feed(d, T0, 60, 70)
    d.update(KpaSpec(stable_window=10), T0 + 59)
    assert d.spec.stable_window == 10


def test_weighted_aggregation_is_used():
    d = KpaDecider("svc", KpaSpec(aggregation=Aggregation.WEIGHTED_EXPONENTIAL), T0)
    now = feed(d, T0, 60, 70)
    r = d.scale(now, ready=1, current=1)
    assert 0 < r.stable < 70  # exponential weights without normalisation


# -- EBC and the activator -------------------------------------------------------------------


@pytest.mark.parametrize(("panic", "ebc"), [(89, 0), (90, -1)])
def test_ebc_from_panic_value(panic, ebc):
    d = KpaDecider("svc", KpaSpec(), T0, ready=1)
    now = feed(d, T0, 60, panic)
    r = d.scale(now, ready=3, current=3)
    assert r.excess_burst_capacity == ebc


def test_ebc_zero_tbc_is_zero_and_serves():
    d = KpaDecider("svc", KpaSpec(target_burst_capacity=0), T0)
    now = feed(d, T0, 60, 70)
    r = d.scale(now, ready=1, current=1)
    assert r.excess_burst_capacity == 0 and not r.activator_in_path


def test_activator_in_path_with_default_tbc_and_one_pod():
    d = KpaDecider("svc", KpaSpec(), T0)
    now = feed(d, T0, 60, 70)
    assert d.scale(now, ready=1, current=1).activator_in_path


@pytest.mark.parametrize(
    ("spec", "ebc"),
    [
        (KpaSpec(initial_scale=2, target=25, target_burst_capacity=42), 8),
        (KpaSpec(), -111),
        (KpaSpec(target_burst_capacity=0), 0),
        (KpaSpec(target_burst_capacity=-1), -1),
    ],
)
def test_initial_ebc(spec, ebc):
    assert initial_excess_burst_capacity(spec) == ebc


@pytest.mark.parametrize(
    ("spec", "ready", "n"),
    [
        (KpaSpec(target_burst_capacity=200), 1, 3),
        (KpaSpec(target_burst_capacity=200), 15, 17),
        (KpaSpec(target_burst_capacity=-1), 5, 5),
        (KpaSpec(target_burst_capacity=0), 50, 2),
    ],
)
def test_activator_count(spec, ready, n):
    assert activator_count(spec, ready) == n


def test_poke_at_zero():
    d = KpaDecider("svc", KpaSpec(), T0)
    d.record(T0, 0)
    d.scale(T0, ready=1, current=1)
    assert d.wants_poke(1.0)
    assert not d.wants_poke(0.0)


# -- reconciler: bounds and the zero gate -----------------------------------------------------


def test_zero_timeline_one_before_zero_then_grace():
    s = KpaScaler("svc", KpaSpec(stable_window=10, scale_to_zero_grace_period=30), T0, ready=1)
    feed(s, T0, 60, 0)  # the queue-proxy reports zero every second
    d = s.decide(T0 + 2, ready=1, current=1)
    assert (d.desired, d.rule) == (1, Rule.KPA_ZERO_GRACE)  # active < one stable window
    d = s.decide(T0 + 10, ready=1, current=1)
    assert d.desired == 1 and "inactive" in d.reason  # becomes inactive, not applied yet
    d = s.decide(T0 + 30, ready=1, current=1)
    assert d.desired == 1 and "grace" in d.reason
    d = s.decide(T0 + 41, ready=1, current=1)
    assert (d.desired, d.rule) == (0, Rule.SCALE_TO_ZERO)


def test_retention_keeps_the_last_pod():
    spec = KpaSpec(stable_window=6, scale_to_zero_grace_period=1, scale_to_zero_pod_retention_period=60)
    s = KpaScaler("svc", spec, T0, ready=1)
    feed(s, T0, 80, 0)
    s.decide(T0 + 6, ready=1, current=1)  # → inactive
    assert s.decide(T0 + 30, ready=1, current=1).desired == 1
    assert s.decide(T0 + 66, ready=1, current=1).desired == 0


def test_scale_to_zero_disabled_keeps_one():
    s = KpaScaler("svc", KpaSpec(enable_scale_to_zero=False), T0, ready=1)
    s.record(T0, 0)
    assert s.decide(T0 + 100, ready=1, current=1).desired == 1


def test_min_and_max_scale_bound_the_decision():
    s = KpaScaler("svc", KpaSpec(min_scale=2, max_scale=4), T0)
    now = feed(s, T0, 60, 7000)
    assert s.decide(now, ready=3, current=3).desired == 4
    s2 = KpaScaler("svc", KpaSpec(min_scale=2), T0)
    s2.record(T0, 0)
    assert s2.decide(T0, ready=2, current=2).desired == 2


def test_initial_scale_is_a_floor_until_reached():
    s = KpaScaler("svc", KpaSpec(initial_scale=3), T0)
    s.record(T0, 1)
    assert s.decide(T0, ready=0, current=3).desired == 3
    s.decide(T0 + 2, ready=3, current=3)  # now initialized
    s.record(T0 + 4, 1)
    assert s.decide(T0 + 4, ready=3, current=3).desired < 3


def test_traffic_reactivates_an_inactive_revision():
    s = KpaScaler("svc", KpaSpec(stable_window=6), T0, ready=1)
    s.record(T0, 0)
    s.decide(T0 + 6, ready=1, current=1)  # inactive
    s.record(T0 + 7, 5)
    d = s.decide(T0 + 7, ready=1, current=1)
    assert d.desired == 1
