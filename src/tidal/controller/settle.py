"""How ``policy: tidal`` settles a step in one decision per vertex (issue #61, DS2's aim).

Two stabilisations, one per direction (kedacore/keda #7405 asks for exactly that):

* **Up** (:class:`CatchUp`): the horizon a backlog is drained in. A start — from 0 replicas, or
  after the vertex idled — drains in ``catch_up`` seconds (10 s): bursts are short, and what
  waits is the whole burst. Once the vertex has drained since, a rise is a rise *under load*,
  and its backlog (what piled up while the new replicas started) drains in ``settle`` seconds
  (45 s), through the headroom of the count the new load needs: drained by extra replicas
  within 10 s instead, those were released again 20 s later, and a ×4 step took three changes
  (``work`` 3 → 12 → 13 → 10) where it now takes one (3 → 10), for 1 s more p99.
  The headroom is checked, not trusted: once the backlog stopped falling over a start-up with
  the replicas asked for ready (``stalled``), or has lasted 1.5 × ``settle`` and a start-up, it
  is drained by replicas in ``catch_up`` seconds after all.
* **Down** (:class:`DownWindow`): what arrivals alone needed over the last ``window`` seconds.
  A scale-down goes to the most of it (Flink's FLINK-36018), and waits while the recent half
  of the window recommends less than the whole: the load is still falling, and going down now
  means going down again (a halving went 10 → 9 → 5; now 10 → 5).

Pure: time is an argument.
"""

from __future__ import annotations

from collections import deque

__all__ = ["SLACK", "CatchUp", "DownWindow"]

SLACK = 1.5  # × the horizon: a backlog drained this soon at full speed needs no more replicas


class CatchUp:
    """The horizon a vertex's backlog drains in, tick by tick (see the module docstring).
    ``settle=None`` drains every backlog in ``catch_up`` seconds (no headroom to rely on)."""

    def __init__(self, catch_up: float, settle: float | None) -> None:
        self.catch_up = catch_up
        self.settle = settle
        self._from_idle = True  # idle or at 0 since it last drained: a start
        self._behind_since: float | None = None  # when the backlog began, if it has not drained
        self._backlogs: deque[tuple[float, float]] = deque()  # (now, backlog) over a start-up

    def started(self) -> None:
        """The vertex is at 0 or idle: what comes next is a start, not a rise under load."""
        self._from_idle = True

    def horizon(
        self,
        now: float,
        backlog: float,
        arriving: float,
        startup: float,
        tick: float,
        *,
        starting: bool = False,
    ) -> float:
        """Seconds to drain ``backlog`` in, at ``now``; then notes whether it has drained.

        ``starting``: replicas asked for are not ready yet. A backlog does not fall while they
        start, so the stall is judged only over a start-up with all of them ready: judged while
        they started (longer than the start-up learnt so far), the cluster's ×4 step read a
        stall 10 s after asking `enrich` for 4 and asked for 6 (1 → 4 → 6, 2026-11-28)."""
        waited = 0.0 if self._behind_since is None else now - self._behind_since
        if starting:
            self._backlogs.clear()
        self._backlogs.append((now, backlog))
        while self._backlogs and self._backlogs[0][0] < now - startup - tick:
            self._backlogs.popleft()
        flat_for = now - self._backlogs[0][0]
        stalled = waited > 2 * startup and flat_for >= startup and backlog >= self._backlogs[0][1]
        by_headroom = (
            self.settle is not None
            and not self._from_idle
            and not stalled
            and waited <= SLACK * self.settle + startup
        )
        if backlog <= arriving:  # drained: from here on a rise is a rise under load
            self._from_idle, self._behind_since = False, None
        elif self._behind_since is None:
            self._behind_since = now
        return self.settle if by_headroom and self.settle is not None else self.catch_up


class DownWindow:
    """What arrivals alone needed (replicas), over the last ``window`` seconds."""

    def __init__(self) -> None:
        self._needed: deque[tuple[float, int]] = deque()

    def note(self, now: float, replicas: int, window: float) -> None:
        self._needed.append((now, replicas))
        while self._needed and self._needed[0][0] < now - window:
            self._needed.popleft()

    def peak(self) -> int:
        """The most needed over the window (0 before anything was noted)."""
        return max((r for _, r in self._needed), default=0)

    def recent(self, now: float, window: float) -> int:
        """The most needed over the window's recent half."""
        return self.since(now - window / 2)

    def since(self, start: float) -> int:
        """The most needed from ``start`` on (the window's most, if nothing was noted since)."""
        return max((r for t, r in self._needed if t >= start), default=self.peak())
