"""A source idled to 0 and woken by what arrives there: the check the Kafka and JetStream source
tests share. Under `tidal` (the default) a source idles to its default ``min`` of 0 after three
start-ups; at 0 its query still runs a trigger, admits nothing and reports what is pending, so
the first message wakes it (rule ``wake-on-pending``). With ``zeroReplicaSleepSeconds`` at 10
minutes a peek could not explain the wake within the test, and would say "peek"."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .waits import eventually

#: The source's scale in these tests: to 0 when idle, and no peek within a test's time.
SCALE_TO_ZERO = {"min": 0, "max": 2, "zeroReplicaSleepSeconds": 600}


def idles_to_zero_then_wakes(
    run: Any, run_dir: Path, vertex: str, first: int, more: Callable[[], int]
) -> None:
    """Wait until ``vertex`` processed ``first`` messages and idled to 0; ``more()`` sends more
    (and says how many); wait until it processed them all. The wake from 0 after ``more()`` is
    on the pending its reader reported at 0 (rule ``wake-on-pending``)."""
    from tidal.controller.events import EventLog

    assert run.control is not None
    control = run.control

    def idle_at_zero() -> None:
        assert control.processed(vertex) == first, control.processed(vertex)
        assert control.replicas(vertex) == 0, control.replicas(vertex)

    eventually(idle_at_zero, 240, f"{vertex} read everything and idled to 0", run=run, poll=0.5)
    at_zero = time.time()
    total = first + more()

    def read_again() -> None:
        assert control.processed(vertex) == total, control.processed(vertex)

    eventually(read_again, 180, f"{vertex} read what was sent at 0", run=run, poll=0.5)
    events = [e for e in EventLog(run_dir / "events.jsonl").read() if e.vertex == vertex]
    wakes = [e for e in events if e.changed and e.current == 0 and e.at >= at_zero]
    assert wakes, [(str(e.rule), e.reason) for e in events]
    assert str(wakes[0].rule) == "wake-on-pending", wakes[0]  # a peek would say "peek"
