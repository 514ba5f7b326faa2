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


def test_replicas_the_cluster_can_never_run_are_not_waited_for():
    """The cluster's bursts: `orders` 3 and `enrich` 6 asked for 9 of the 8 cores the executor
    bounds allow; `enrich` had 5 ready until `orders` fell back 14 s later, and a start-up of
    24 s was learnt where its executors ran their first tasks 5-10 s after the request."""
    startups = StartUps(8.0)
    startups.asked(view(100, 1, 0), 6)
    capped = [dataclasses.replace(view(t, 6, 100.0 * t, ready=5), attainable=5) for t in (104, 110)]
    assert startups.starting(dataclasses.replace(capped[0], ready=2))
    startups.learn(capped[1])  # all it can ever have are ready: a start-up of 10 s
    assert startups.seconds == 9.0
    assert not startups.starting(capped[1])
    blind = StartUps(8.0)  # without the bound (local mode, the simulator): waited for, as before
    blind.asked(view(100, 1, 0), 6)
    blind.learn(view(110, 6, 1000, ready=5))
    assert blind.seconds == 8.0 and blind.starting(view(110, 6, 1000, ready=5))


def test_a_scale_up_of_which_no_replica_can_come_teaches_no_start_up():
    """The cluster's cores all taken by other vertices: the vertex's share of the bounds is what
    it has, so the replicas asked for beyond it never start, and the next tick's readiness is no
    start-up of 1 s."""
    startups = StartUps(8.0)
    startups.asked(view(100, 1, 0, ready=1), 3)
    full = dataclasses.replace(view(101, 3, 100, ready=1), attainable=1)
    startups.learn(full)
    assert startups.seconds == 8.0 and not startups.starting(full)
    startups.asked(view(110, 1, 0, ready=1), 3)  # room for one more of them: that one is a start-up
    startups.learn(dataclasses.replace(view(116, 3, 100, ready=2), attainable=2))
    assert startups.seconds == 7.0
