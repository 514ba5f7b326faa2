"""Waits that cover what they assert.

A test that waits for one thing and then asserts another passes on a fast box and fails on a slow
one: the wait ended because *its* condition held, while the asserted state was still on its way
(#54: a chain test waited for three of its four sinks, then asserted on the fourth). So the
integration tests wait on the assertion itself: :func:`eventually` runs a check made of the very
``assert`` statements the test means, again and again, until it passes or a generous deadline
runs out, and then fails with the check's own last message. The wait can cover no less than the
assertions, because it *is* them.

Anything that only ever grows (ids delivered, a count processed) is checked for its final value
inside :func:`eventually`; anything that must *not* happen later (a duplicate after the last
id arrived) is checked once more after the run stopped, on the final state.

Every wait also watches what it waits on: a ``tidal`` subprocess that exited, or a streaming
query that failed, ends the wait at once with that process's output or that query's error,
instead of leaving the test to time out with nothing to say.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: How often a check is tried again. A check reads files or asks a server; five times a second
#: costs nothing next to what a test waits for (a trigger, a JVM, an election).
POLL_SECONDS = 0.2


def eventually(
    check: Callable[[], T],
    timeout: float,
    what: str,
    *,
    proc: subprocess.Popen[Any] | None = None,
    query: Any = None,
    run: Any = None,
    poll: float = POLL_SECONDS,
) -> T:
    """Run ``check`` until it returns without an ``AssertionError``, and return what it returned.

    ``timeout`` is a deadline, not a measurement: it is there so a broken run fails instead of
    hanging, and is set far above what a box at half speed needs. On timeout the error says
    ``what`` was waited for and carries the check's last failure (the ids still missing, the
    count reached). ``proc`` is a subprocess that must stay alive while we wait (its output is
    shown if it exits); ``query`` a Spark streaming query whose failure ends the wait; ``run`` a
    live ``PipelineRun`` whose ``check()`` is called before every try, as ``run.wait`` polls (a
    failed vertex ends the wait with its error, and one failed for a transient reason has its
    query started again).
    """
    deadline = time.monotonic() + timeout
    while True:
        if run is not None:
            run.check()
        try:
            return check()
        except AssertionError as failure:
            last = failure
        _still_running(proc, query, what)
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}: {last}") from last
        time.sleep(poll)


def wait_for(
    condition: Callable[[], bool],
    timeout: float,
    what: str,
    proc: subprocess.Popen[Any] | None = None,
    *,
    query: Any = None,
    poll: float = POLL_SECONDS,
) -> None:
    """Wait until ``condition()`` is true: for a condition that is the whole of what follows it
    (a process ready, a file present). Where assertions follow, wait with :func:`eventually`."""

    def check() -> None:
        assert condition(), f"not yet: {what}"

    eventually(check, timeout, what, proc=proc, query=query, poll=poll)


def _still_running(proc: subprocess.Popen[Any] | None, query: Any, what: str) -> None:
    if proc is not None and proc.poll() is not None:
        out = proc.stdout.read() if proc.stdout is not None else ""
        raise AssertionError(f"the process exited ({proc.returncode}) before {what}:\n{out}")
    if query is not None and query.exception() is not None:
        raise AssertionError(f"the query failed before {what}: {query.exception()}")
