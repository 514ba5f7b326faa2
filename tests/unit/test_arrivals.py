"""Which ticks measured the arrivals (``tidal.controller.arrivals``): a stall of the sources'
counts, with messages waiting upstream, measures nothing downstream, though the vertex moves on
its own as it drains what it had."""

from __future__ import annotations

import dataclasses

import pytest

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


def test_a_rate_spans_the_times_the_counts_were_true_not_the_ticks_that_read_them():
    """A source reports when it plans a micro-batch; after a 2 s batch the next report came a
    second after a tick that still read the one before it: over the tick's second, 2,491/s
    arriving where 900/s did. Over the reports' times, it is 900/s."""
    arrivals = Arrivals(keep_seconds=30.0, frozen_seconds=10.0)

    def at(now: float, true_at: float) -> PolicyInput:
        v = view(now, 500.0 * now, 900.0 * true_at, 300.0)
        return dataclasses.replace(v, upstream_age=now - true_at)

    for t in range(10):
        arrivals.observe(at(t, t))
    arrivals.observe(at(10, 9.1))  # the report made as the long batch was planned
    arrivals.observe(at(11, 9.1))  # still that one: the batch runs on
    arrivals.observe(at(12, 11.8))  # the next, made 0.2 s before this tick
    here, sources = arrivals.rates(12.0, 1.0)
    assert sources == pytest.approx(900.0)
    assert here == pytest.approx(500.0)  # the vertex's own counts are read at the tick


def test_a_tick_left_out_as_frozen_widens_the_window_instead_of_emptying_it():
    """The cluster's bursts (2026-11-30): a source's arrivals are its last report's, so the same
    report read at two ticks is one frozen sample, left out. The next report came with a burst:
    80,072 → 85,031 arrived over two seconds. A one-second window that starts at the first sample
    inside it held only the tick's own sample and read 0/s (measured), and `enrich` never saw
    that burst rise. Widened to the last sample kept, it reads the burst."""
    arrivals = Arrivals(keep_seconds=30.0, frozen_seconds=10.0)
    for t in range(10):
        arrivals.observe(view(t, 100.0 * t, 100.0 * t, 30.0))
    arrivals.observe(view(10, 1_000.0, 1_000.0, 5_000.0))  # the burst's first report
    arrivals.observe(view(11, 1_000.0, 1_000.0, 5_000.0))  # read again: frozen, left out
    arrivals.observe(view(12, 5_959.0, 5_959.0, 7_000.0))  # the next report
    here, sources = arrivals.rates(12.0, 1.0)
    assert sources == pytest.approx(4_959.0 / 2)  # over the two seconds since the last sample kept
    assert here == pytest.approx(4_959.0 / 2)
    assert arrivals.measured(view(12, 5_959.0, 5_959.0, 7_000.0), 1.0)
