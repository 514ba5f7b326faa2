"""Knative's multiscaler and KPA reconciler, ported: ``TestSameSign``
(``pkg/autoscaler/scaling/multiscaler_test.go``), ``updateLatestScale``'s informs
(``TestMultiScalerOnlyCapacityChange``, ``TestMultiscalerCreateTBC42`` / ``…TBCMinus1``), the mode
the reconciler picks and ``computeStatus``'s desired scale, onto :mod:`tidal.scaling.kpa_notify`."""

from __future__ import annotations

import pytest

from tidal.scaling.kpa import KpaSpec, initial_excess_burst_capacity
from tidal.scaling.kpa_notify import (
    SCALE_UNKNOWN,
    DeciderStatus,
    SksMode,
    reported_desired_scale,
    same_sign,
    sks_mode,
    update_latest_scale,
)


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [(1982, 1984, True), (-1984, -1988, True), (-1988, 2006, False), (-2006, 2009, False), (0, 1, True),
     (0, -42, False)],
)  # fmt: skip
def test_same_sign(a, b, want):
    assert same_sign(a, b) is want


def test_only_capacity_change_informs():
    status = DeciderStatus()
    status, inform = update_latest_scale(status, 1, 1)
    assert inform  # the first tick: the desired scale is no longer unknown
    status, inform = update_latest_scale(status, 1, 1)
    assert not inform
    status, inform = update_latest_scale(status, 1, -1)  # only the EBC's sign changed
    assert inform and status == DeciderStatus(1, -1)
    status, inform = update_latest_scale(status, 1, -7.5)
    assert not inform and status.excess_burst_capacity == -8  # int32 of a floor


def test_a_new_decider_reports_unknown_scale_and_its_initial_ebc():
    """``TestMultiscalerCreateTBC42``: initial scale 2 × total 25 − TBC 42 = 8; TBC −1 stays −1."""
    spec = KpaSpec.decider(20, 25, initial_scale=2, target_burst_capacity=42)
    assert DeciderStatus(excess_burst_capacity=int(initial_excess_burst_capacity(spec))) == DeciderStatus(
        -1, 8
    )
    minus_one = KpaSpec(target_burst_capacity=-1)
    assert initial_excess_burst_capacity(minus_one) == -1


@pytest.mark.parametrize(
    ("want", "ebc", "inactive", "mode"),
    [
        pytest.param(SCALE_UNKNOWN, 5, True, SksMode.PROXY, id="unknown and inactive: stay in proxy"),
        pytest.param(3, 0, False, SksMode.SERVE, id="want > 0, ebc = 0: serve"),
        pytest.param(3, -1, False, SksMode.PROXY, id="negative ebc: proxy"),
        pytest.param(0, 10, False, SksMode.PROXY, id="want 0: proxy"),
    ],
)
def test_sks_mode(want, ebc, inactive, mode):
    assert sks_mode(want, ebc, inactive) is mode


def test_compute_status_keeps_a_known_desired_scale_over_an_unknown_one():
    assert reported_desired_scale(None, SCALE_UNKNOWN) == SCALE_UNKNOWN
    assert reported_desired_scale(4, SCALE_UNKNOWN) == 4
    assert reported_desired_scale(4, 0) == 0
