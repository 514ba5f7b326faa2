"""Which query failures are the machine's, not the pipeline's, and how often they are retried.

PySpark starts a fresh Python worker for some of a streaming query's work (the Python data
source's planning and commits) and gives it 10 seconds, fixed in Spark, to connect back. On a
machine busy enough that starting an interpreter takes longer, the micro-batch fails with "Python
worker failed to connect back", and the query stops: measured once in a CI run on 2 cores with
other test processes beside it. Nothing about the pipeline is wrong, and its checkpoint holds the
batch, so the runtime starts the query again from the checkpoint (exactly once is kept: the batch
replays) instead of stopping the run, at most :data:`BUDGET` times per vertex in
:data:`WINDOW_SECONDS`; each restart is an event (rule ``restarted``) with Spark's reason. Any
other failure, or one more than the budget, stops the run as before, naming the vertex.

**The buffers unreachable** (a JetStream server or the link to it down: the micro-batch's read or
write times out) is the machine's too, but it lasts as long as the outage, not one attempt: three
restarts in a row would be spent in seconds. So a query that failed that way is started again
every :data:`OUTAGE_RETRY_SECONDS` while the failures go on, for up to :data:`OUTAGE_SECONDS`
from the first of them (:class:`OutageRestarts`); a batch that commits ends the outage. Measured
on the chaos bench (``tidal bench chaos``): with the driver host's link down 30 s, a map's query
failed with ``TimeoutError: nats: timeout`` and, before this, stopped the whole run.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from tidal import errors

__all__ = [
    "BUDGET",
    "OUTAGE_RETRY_SECONDS",
    "OUTAGE_SECONDS",
    "TRANSIENT",
    "UNREACHABLE",
    "WINDOW_SECONDS",
    "OutageRestarts",
    "QueryFailures",
    "RestartBudget",
    "transient",
    "unreachable",
]

TRANSIENT = (
    "Python worker failed to connect back",
    "Timed out while waiting for the Python worker to connect back",
)
BUDGET = 3
WINDOW_SECONDS = 600.0
# What nats.py says when no server of the buffers' answers (a timeout, no server, a closed link).
# "No responders" / "no response from stream": no server serves the stream now (its replicas are
# electing a leader after one was lost, for longer than the buffer's own retries wait).
UNREACHABLE = (
    "nats: timeout",
    "nats: no servers available",
    "nats: connection closed",
    "NoServersError",
    "nats: no responders available",
    "nats: no response from stream",
)
OUTAGE_SECONDS = 300.0
OUTAGE_RETRY_SECONDS = 5.0


def transient(reason: str) -> bool:
    """A failure that says the machine was too slow, not that the pipeline is wrong."""
    return any(text in reason for text in TRANSIENT)


def unreachable(reason: str) -> bool:
    """A failure that says the buffers' servers did not answer (an outage, not a wrong pipeline)."""
    return any(text in reason for text in UNREACHABLE)


class OutageRestarts:
    """When to start a query again that failed because the buffers were unreachable: not before
    ``retry`` seconds after its last start, and only while its outage (from the first failure
    since its last committed batch) is under ``limit`` seconds. Time is an argument."""

    def __init__(self, limit: float = OUTAGE_SECONDS, retry: float = OUTAGE_RETRY_SECONDS) -> None:
        self.limit, self.retry = limit, retry
        self._since: dict[str, float] = {}
        self._last: dict[str, float] = {}

    def decide(self, vertex: str, now: float) -> str:
        """``restart`` now, ``wait`` (the last start was too recent), or ``give-up``."""
        since = self._since.setdefault(vertex, now)
        if now - since > self.limit:
            return "give-up"
        if now - self._last.get(vertex, -1e18) < self.retry:
            return "wait"
        self._last[vertex] = now
        return "restart"

    def in_outage(self, vertex: str) -> bool:
        return vertex in self._since

    def outage(self, vertex: str, now: float) -> float:
        """Seconds since the vertex's outage began (0 when it has none)."""
        since = self._since.get(vertex)
        return 0.0 if since is None else now - since

    def recovered(self, vertex: str) -> None:
        """The vertex's query committed a batch: its outage is over."""
        self._since.pop(vertex, None)
        self._last.pop(vertex, None)


class RestartBudget:
    """At most ``budget`` restarts per vertex within ``window`` seconds (time is an argument)."""

    def __init__(self, budget: int = BUDGET, window: float = WINDOW_SECONDS) -> None:
        self.budget = budget
        self.window = window
        self._at: dict[str, deque[float]] = {}

    def take(self, vertex: str, now: float) -> int | None:
        """The attempt number of a restart allowed now (1, 2, …), or None when spent."""
        recent = self._at.setdefault(vertex, deque())
        while recent and now - recent[0] > self.window:
            recent.popleft()
        if len(recent) >= self.budget:
            return None
        recent.append(now)
        return len(recent)


class QueryFailures:
    """What the run does with a failed query: a transient failure restarts it (within the
    budget), the buffers unreachable restart it while the outage lasts, anything else stops the
    run naming the vertex. ``restart(name, why, attempt)`` starts the query again."""

    def __init__(self, restart: Callable[[str, str, int], None]) -> None:
        self._restart = restart
        self._budget = RestartBudget()
        self._outages = OutageRestarts()

    def check(self, queries: Mapping[str, Any]) -> None:
        """Look at every query once: raise :class:`~tidal.errors.PipelineError` for a failure
        that is the pipeline's (or one restarted too often), restart the others."""
        from tidal.spark.query.vertex import failure_reason

        for name, query in list(queries.items()):
            exc = query.exception()
            if exc is None:
                if self._outages.in_outage(name) and query.lastProgress is not None:
                    self._outages.recovered(name)  # it ran a batch since its restart
                continue
            reason = failure_reason(exc)
            now = time.time()
            if unreachable(reason):
                verdict = self._outages.decide(name, now)
                if verdict == "give-up":
                    lasted = self._outages.outage(name, now)
                    raise errors.PipelineError(
                        name, f"the buffers were unreachable for {lasted:.0f} s: {reason}"
                    )
                if verdict == "restart":
                    self._restart(
                        name, f"query restarted from its checkpoint: the buffers did not answer ({reason})", 0
                    )
                continue
            attempt = self._budget.take(name, now) if transient(reason) else None
            if attempt is None:
                raise errors.PipelineError(name, reason)
            why = f"after a transient failure ({attempt} of {BUDGET}): {reason}"
            self._restart(name, f"query restarted from its checkpoint {why}", attempt)
