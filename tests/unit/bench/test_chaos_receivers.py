"""The receiver-cut scenario's own check: the ready receivers in the KPA's scale-up."""

from __future__ import annotations

from tidal.bench.chaos_checks import Fault
from tidal.bench.chaos_receivers import _ready_drops


def ready(at: float, n: int) -> dict:
    return {"name": "in", "at": at, "replicas": n, "pending": 1.0}


def decision(at: float, current: int, desired: int) -> dict:
    return {"vertex": "in", "at": at, "current": current, "desired": desired}


EVENTS = [decision(10, 2, 4), decision(11, 4, 6), decision(30, 6, 3)]
CUT = Fault("receiver host", 12.0, "r2 cut")


def test_a_fall_in_the_cuts_window_is_explained_up_to_the_receivers_called_lost():
    rows = [ready(9, 2), ready(10.5, 4), ready(12.5, 4), ready(15, 2), ready(17, 6), ready(31, 3)]
    found = _ready_drops(rows, EVENTS, 5.0, CUT, lost=2)
    assert found.held and found.numbers["replicas_explained"] == 2
    assert not _ready_drops(rows, EVENTS, 5.0, CUT, lost=1).held  # it took more than the run said


def test_a_fall_outside_the_window_is_a_violation_and_the_kpas_own_scale_down_ends_the_scale_up():
    rows = [ready(9, 2), ready(10.5, 4), ready(25, 3), ready(31, 3), ready(32, 2)]
    found = _ready_drops(rows, EVENTS, 5.0, CUT, lost=1)
    assert found.violations == ["in: ready 4 → 3 at 25.0, no fault"]
    after_down = [ready(9, 2), ready(10.5, 6), ready(31, 3), ready(32, 2)]
    assert _ready_drops(after_down, EVENTS, 5.0, CUT, lost=0).held
