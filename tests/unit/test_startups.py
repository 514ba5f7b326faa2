"""StartUps (``tidal.controller.startups``): a start-up learnt from readiness, and a query
restarting after any change, until a start-up after its first work since."""

from __future__ import annotations

import dataclasses

from tidal.controller import PolicyInput
from tidal.controller.startups import StartUps
from tidal.scaling import PressureCheck, VertexKind


def view(
    now: float, replicas: int, processed: float, ready: int | None = None, scaled_at: float = 0.0
) -> PolicyInput:
    return PolicyInput(
        name="enrich", kind=VertexKind.UDF, now=now, replicas=replicas,
        ready=replicas if ready is None else ready, processed=processed, pending_now=500.0,
        busy_seconds=None, rate=None, pending=None, last_scaled_at=scaled_at,
        pressure=PressureCheck.none(), started_at=0.0, buffer_max_length=30_000,
        buffer_usage_limit=0.8, read_batch_size=500,
    )  # fmt: skip


def test_a_scale_down_restarts_the_query_until_a_start_up_after_its_first_work():
    """The cluster's step: 5 → 3 under 900/s, the query stopped for 6-7 s with a start-up of
    3 s learnt, and the backlog it piled up was read as a stall."""
    startups = StartUps(3.0)
    assert not startups.restarting(view(10, 5, 9000))
    seen = [startups.restarting(view(t, 3, 9000, scaled_at=10)) for t in range(11, 17)]  # 6 s idle
    assert all(seen)
    assert startups.restarting(view(17, 3, 10_500, scaled_at=10))  # the first batch after it
    assert startups.restarting(view(19, 3, 12_000, scaled_at=10))  # within a start-up of it
    assert not startups.restarting(view(20, 3, 13_000, scaled_at=10))  # a start-up after: judged


def test_a_change_the_controller_did_not_apply_restarts_nothing():
    startups = StartUps(3.0)
    startups.changed(view(10, 5, 9000), 3)  # decided, but the count stays (no new last_scaled_at)
    assert not any(startups.restarting(view(t, 5, 9000 + 900 * t)) for t in range(11, 15))


def test_replicas_asked_for_are_starting_and_the_backlog_is_projected_to_when_the_first_are_due():
    startups = StartUps(5.0)
    before = view(0, 2, 0)
    startups.asked(before, 4)
    assert startups.starting(view(1, 4, 100, ready=2))
    assert startups.until_ready(view(1, 4, 100, ready=2)) == 4.0
    startups.asked(view(2, 4, 200, ready=2), 6)  # asked again: still due from the first ask
    assert startups.until_ready(view(2, 6, 200, ready=2)) == 3.0
    startups.learn(dataclasses.replace(view(11, 6, 900), ready=6))
    assert startups.seconds == 7.0  # half-way from 5 to the 9 s since the last ask
    assert not startups.starting(view(12, 6, 1000))
