"""Knative's own configuration keys, with Knative's meanings (knative.md §1.1–1.2, §1.6)."""

from __future__ import annotations

import pytest

from tidal.errors import SpecError
from tidal.scaling import KpaMetric, KpaScaler, KpaSpec, Rule


def test_target_utilization_percentage_annotation_of_1_means_one_percent() -> None:
    spec = KpaSpec.from_knative(annotations={"autoscaling.knative.dev/target-utilization-percentage": "1"})
    assert spec.target_utilization == pytest.approx(0.01)
    assert spec.target_value == pytest.approx(1.0)  # 1 % of the default total of 100


def test_container_concurrency_target_percentage_of_1_means_one_hundred_percent() -> None:
    # The config key divides only values above 1 by 100.
    spec = KpaSpec.from_knative({"container-concurrency-target-percentage": "1"})
    assert spec.target_utilization == 1.0
    spec = KpaSpec.from_knative({"container-concurrency-target-percentage": "70"})
    assert spec.target_utilization == pytest.approx(0.7)


def test_the_field_itself_takes_a_fraction_only() -> None:
    with pytest.raises(SpecError, match=r"kpa.targetUtilization.*from_knative"):
        KpaSpec(target_utilization=70)


def test_container_concurrency_target_default_sets_the_total() -> None:
    spec = KpaSpec.from_knative({"container-concurrency-target-default": "10"})
    assert (spec.total_value, spec.target_value) == (10, pytest.approx(7))


def test_requests_per_second_target_default_sets_the_rps_total() -> None:
    spec = KpaSpec.from_knative({"requests-per-second-target-default": "50"}, {"metric": "rps"})
    assert spec.metric == KpaMetric.RPS
    assert (spec.total_value, spec.target_value) == (50, pytest.approx(35))


def test_target_default_times_utilization_must_reach_one_hundredth() -> None:
    with pytest.raises(SpecError, match=r"containerConcurrencyTargetDefault"):
        KpaSpec(container_concurrency_target_default=0.01, target_utilization=0.5)


@pytest.mark.parametrize(
    ("fields", "ok"),
    [
        pytest.param({"max_scale_limit": 10, "max_scale": 10}, True, id="max-at-limit"),
        pytest.param({"max_scale_limit": 10, "max_scale": 11}, False, id="max-over-limit"),
        pytest.param({"max_scale_limit": 10, "max_scale": 0}, False, id="unbounded-under-a-limit"),
        pytest.param({"max_scale_limit": 0, "max_scale": 0}, True, id="no-limit"),
    ],
)
def test_max_scale_limit(fields: dict[str, int], ok: bool) -> None:
    if ok:
        KpaSpec(**fields)
    else:
        with pytest.raises(SpecError, match=r"kpa.maxScale"):
            KpaSpec(**fields)


def test_durations_and_flags_are_read_as_knative_writes_them() -> None:
    spec = KpaSpec.from_knative(
        {"stable-window": "2m", "scale-to-zero-grace-period": "45s", "enable-scale-to-zero": "false"},
        {"window": "90s"},  # the annotation wins over the config key
    )
    assert (spec.stable_window, spec.scale_to_zero_grace_period, spec.enable_scale_to_zero) == (90, 45, False)


def test_an_unknown_key_names_itself_and_the_known_ones() -> None:
    with pytest.raises(SpecError, match=r"kpa.stable-windw.*known keys"):
        KpaSpec.from_knative({"stable-windw": "60s"})


def test_per_replica_target_and_total() -> None:
    spec = KpaSpec.per_replica(target=140, total=200, metric=KpaMetric.RPS)
    assert (spec.total_value, spec.target_value) == (200, pytest.approx(140))
    with pytest.raises(SpecError, match=r"kpa.target"):
        KpaSpec.per_replica(target=300, total=200)


def test_activation_deadline_a_revision_that_never_becomes_ready_goes_to_zero() -> None:
    """Knative: a PA activating past progress-deadline + 30 s may go to 0 ("TimedOut")."""
    spec = KpaSpec(metric=KpaMetric.RPS, target=10, progress_deadline=60)
    scaler = KpaScaler("v", spec, now=0.0, ready=0)
    scaler.record(0.0, 5.0)  # traffic: wake
    woke = scaler.decide(1.0, ready=0, current=0)
    assert woke.desired == 1
    # The traffic stops; the replica never becomes ready.
    decisions = {}
    for t in range(2, 200):
        scaler.record(float(t), 0.0)
        decisions[t] = scaler.decide(float(t), ready=0, current=1)
    held = [d for t, d in decisions.items() if t < 88 and d.desired == 0]
    assert not held, "no zero before the activation timeout (60 + 30 s)"
    timed_out = [t for t, d in decisions.items() if d.rule == Rule.KPA_ACTIVATION_TIMEOUT]
    assert timed_out and 90 <= timed_out[0] <= 95
    assert decisions[timed_out[0]].desired == 0
    assert "TimedOut" in decisions[timed_out[0]].reason


def test_a_revision_that_becomes_ready_is_active_not_timed_out() -> None:
    spec = KpaSpec(metric=KpaMetric.RPS, target=10, progress_deadline=60)
    scaler = KpaScaler("v", spec, now=0.0, ready=0)
    scaler.record(0.0, 5.0)
    scaler.decide(1.0, ready=0, current=0)
    rules = set()
    for t in range(2, 400):
        scaler.record(float(t), 0.0)
        rules.add(scaler.decide(float(t), ready=1, current=1).rule)
    assert Rule.KPA_ACTIVATION_TIMEOUT not in rules
