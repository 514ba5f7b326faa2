"""Which ticks measured the arrivals (``tidal.controller.arrivals``): a stall of the sources'
counts, with messages waiting upstream, measures nothing downstream, though the vertex moves on
its own as it drains what it had."""

from __future__ import annotations

from tidal.controller import PolicyInput
from tidal.controller.arrivals import Arrivals
from tidal.scaling import PressureCheck, VertexKind


def view(
    now: float, processed: float, sources: float, upstream_pending: float, pending: float = 100.0
) -> PolicyInput:
    return PolicyInput(
        name="enrich", kind=VertexKind.UDF, now=now, replicas=3, ready=3, processed=processed,
        pending_now=pending, busy_seconds=None, rate=None, pending=None, last_scaled_at=0.0,
        pressure=PressureCheck.none(), started_at=0.0, buffer_max_length=30_000,
        buffer_usage_limit=0.8, read_batch_size=500, upstream_pending=upstream_pending,
        upstream_arrived=sources,
    )  # fmt: skip


def measured_over(arrivals: Arrivals, views: list[PolicyInput]) -> list[bool]:
    out = []
    for v in views:
        arrivals.observe(v)
        arrivals.demand(v, 1.0, 30.0)  # learns where the sources are
        out.append(arrivals.measured(v, 1.0))
    return out


def test_the_sources_counts_frozen_while_messages_wait_upstream_measure_nothing_for_a_while():
    arrivals = Arrivals(keep_seconds=30.0, frozen_seconds=10.0)
    steady = [view(t, 900.0 * t, 900.0 * t, 300.0) for t in range(20)]
    assert all(measured_over(arrivals, steady)[1:])
    # `orders` restarts: its counts stand still with 300 pending, `enrich` drains on its own
    stalled = [view(t, 900.0 * 19 + 50 * (t - 19), 900.0 * 19, 300.0) for t in range(20, 34)]
    seen = measured_over(arrivals, stalled)
    assert not any(seen[:10]), seen  # the down window's 10 s
    assert all(seen[11:]), seen  # frozen for longer, they are what happens, and count again
    moving = [view(t, 900.0 * t, 900.0 * t, 300.0) for t in range(34, 37)]
    assert all(measured_over(arrivals, moving))


def test_sources_that_stop_with_nothing_waiting_upstream_are_a_quiet_spell_measured():
    arrivals = Arrivals(keep_seconds=30.0, frozen_seconds=10.0)
    measured_over(arrivals, [view(t, 900.0 * t, 900.0 * t, 300.0) for t in range(20)])
    quiet = [view(t, 900.0 * 19 + 300, 900.0 * 19, 0.0, pending=0.0) for t in range(20, 25)]
    assert all(measured_over(arrivals, quiet)[1:])
