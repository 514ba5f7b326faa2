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
"""

from __future__ import annotations

from collections import deque

__all__ = ["BUDGET", "TRANSIENT", "WINDOW_SECONDS", "RestartBudget", "transient"]

TRANSIENT = (
    "Python worker failed to connect back",
    "Timed out while waiting for the Python worker to connect back",
)
BUDGET = 3
WINDOW_SECONDS = 600.0


def transient(reason: str) -> bool:
    """A failure that says the machine was too slow, not that the pipeline is wrong."""
    return any(text in reason for text in TRANSIENT)


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
