"""Knative's configuration as upstream accepts it: Go durations (``time.ParseDuration``, the
cases of Go's own ``TestParseDuration`` that a window can hold), the PodAutoscalerClass
annotation, and a decider with no TotalValue (``DeciderSpec`` as the deciders' tests build it)."""

from __future__ import annotations

import pytest

from tidal.errors import SpecError
from tidal.scaling.durations import go_duration
from tidal.scaling.kpa_spec import KpaSpec, initial_excess_burst_capacity


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0), ("5s", 5.0), ("30s", 30.0), ("1478s", 1478.0), ("-5s", -5.0), ("+5s", 5.0),
        ("5.0s", 5.0), ("5.6s", 5.6), ("5.s", 5.0), (".5s", 0.5), ("1.0s", 1.0), ("1.00s", 1.0),
        ("1.004s", 1.004), ("100.00100s", 100.001), ("10ns", 10e-9), ("11us", 11e-6), ("12µs", 12e-6),
        ("12μs", 12e-6), ("13ms", 0.013), ("14s", 14.0), ("15m", 900.0), ("16h", 57_600.0),
        ("3h30m", 12_600.0), ("10.5s4m", 250.5), ("-2m3.4s", -123.4), ("1h2m3s4ms5us6ns", 3723.004005006),
        ("39h9m14.425s", 140_954.425), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0),
    ],
)  # fmt: skip
def test_go_parse_duration(text, seconds):
    assert go_duration(text) == pytest.approx(seconds, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("text", ["", "3", "-", "s", ".", "-.", ".s", "+.s", "1d", "1m2", "s1", "1x"])
def test_go_parse_duration_errors(text):
    with pytest.raises(ValueError, match="invalid duration"):
        go_duration(text)


@pytest.mark.parametrize(
    ("config", "annotations", "window"),
    [
        pytest.param({"stable-window": "1m30s"}, {}, 90.0, id="config 1m30s"),
        pytest.param({}, {"autoscaling.knative.dev/window": "90000ms"}, 90.0, id="annotation 90000ms"),
        pytest.param({"stable-window": "1h"}, {}, 3600.0, id="config 1h"),
        pytest.param({"stable-window": 60}, {}, 60.0, id="a YAML number is seconds"),
    ],
)
def test_windows_in_go_durations(config, annotations, window):
    assert KpaSpec.from_knative(config, annotations).stable_window == window


def test_a_window_that_is_not_a_duration_names_the_key_and_the_fix():
    with pytest.raises(SpecError, match=r"kpa.stable-window.*Go duration"):
        KpaSpec.from_knative({"stable-window": "1 minute"})


def test_pod_autoscaler_class_kpa_is_accepted_and_hpa_is_refused_with_the_fix():
    spec = KpaSpec.from_knative(annotations={"autoscaling.knative.dev/class": "kpa.autoscaling.knative.dev"})
    assert spec == KpaSpec()
    with pytest.raises(SpecError, match=r"kpa.class.*policy: numaflow"):
        KpaSpec.from_knative(annotations={"autoscaling.knative.dev/class": "hpa.autoscaling.knative.dev"})


def test_a_decider_with_no_total_value_counts_no_capacity_per_pod():
    """Upstream's decider tests build ``DeciderSpec{TargetValue: 10}`` with no TotalValue."""
    spec = KpaSpec.decider(10, target_burst_capacity=0)
    assert (spec.target_value, spec.total_value) == (10, 0)
    spec = KpaSpec.decider(10, target_burst_capacity=50, initial_scale=3)
    assert initial_excess_burst_capacity(spec) == -50  # 3 × 0 − 50
    assert KpaSpec.decider(100, 120).total_value == 120
    with pytest.raises(SpecError, match=r"kpa\.totalValue"):
        KpaSpec.decider(10, -1)
