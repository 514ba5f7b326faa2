"""How long ``policy: tidal``'s replicas take to start, and whether they are starting now.

A replica shows as ready once a micro-batch ran on it (on Spark), so a start-up is learnt from
how long asked-for replicas took to show as ready (:meth:`StartUps.learn`), and while they start
the backlog is projected to when the first ones asked for are due (:meth:`StartUps.until_ready`).
A change of count in either direction restarts the vertex's query, and until a start-up after its
first work since, the backlog it piles up says nothing about whether the replicas keep up
(:meth:`StartUps.restarting`, which :class:`~tidal.controller.settle.CatchUp` is told).

Pure: time is an argument.
"""

from __future__ import annotations

from tidal.controller.policy import PolicyInput
from tidal.scaling.executors import slotted

__all__ = ["StartUps"]


class StartUps:
    """One vertex's start-ups: learnt from ``guess`` seconds on (see the module docstring)."""

    _had = 0  # the replicas ready when the last scale-up was asked for

    def __init__(self, guess: float) -> None:
        self.seconds = guess  # until a start-up is observed
        # (when, replicas, when the first still starting was asked for): a scale-up not ready yet
        self._asked: tuple[float, int, float] | None = None
        self._woke_at: float | None = None  # processed when that scale-up woke the vertex from 0
        self._asked_blind = False  # nothing waited at some tick since: its readiness can't show
        self._changed: tuple[float, float | None] | None = None  # processed at a change; first work after
        self._scaled_at: float | None = None  # the last change seen (PolicyInput.last_scaled_at)

    def learn(self, view: PolicyInput) -> None:
        """Learn a start-up once the replicas last asked for are ready."""
        if self._asked is not None and not view.pending_now and not view.upstream_pending:
            # A replica shows as ready once a micro-batch ran on it (on Spark), which needs
            # messages: with none waiting here or upstream, the wait measures the quiet, not the
            # start-up. (A scale-up as a wave ended, ready at the next wave 70 s later, would
            # teach a start-up of 37 s.) Woken with the path, the wait for the upstream's start
            # counts: it is what this vertex's readiness takes.
            self._asked_blind = True
        # Woken from 0, the runtime counts the replicas of the vertex's last micro-batch as ready
        # at once (a batch before the 0 is all it has seen): the first work done shows the start.
        woken = self._woke_at is not None and view.processed > self._woke_at
        # Replicas the cluster can never run (beyond the vertex's share of maxExecutors) are not
        # waited for: on the cluster's bursts `orders` 3 and `enrich` 6 asked for 9 of 8 cores,
        # `enrich` stayed at 5 ready until `orders` fell back, and a start-up of 24 s was learnt
        # where its executors ran their first tasks 5-10 s after the request.
        wanted = slotted(self._asked[1], view.attainable) if self._asked is not None else 0
        if self._asked is not None and (woken or (self._woke_at is None and view.ready >= wanted)):
            if not self._asked_blind and (woken or wanted > self._had):  # else none could start
                took = view.now - self._asked[0]
                self.seconds += 0.5 * (took - self.seconds)  # few observations: learn them fast
            self._asked = self._woke_at = None

    def starting(self, view: PolicyInput) -> bool:
        """Are replicas asked for still starting?"""
        return self._asked is not None and view.ready < view.ready_for

    def until_ready(self, view: PolicyInput) -> float:
        """Seconds until the replicas asked for now would be ready. Asked again while replicas
        are starting, those come when they were due, and the backlog is projected to then:
        projected from each new ask instead, each one pushed the moment back and grew the
        projection by a tick of shortfall, so a small revision of the capacity asked for one
        more every tick (the simulator's step x10, with the learnt capacity moving from 234 to
        223/s: `work` 19 → 20 → … → 25 in six ticks)."""
        if self.starting(view) and self._asked is not None:
            return max(0.0, self._asked[2] + self.seconds - view.now)
        return self.seconds

    def restarting(self, view: PolicyInput) -> bool:
        """Replicas starting, or the query restarting after a change, until a start-up after its
        first work since: a scale-down restarts it too (6-7 s on the cluster, where a start-up of
        3 s was learnt), and the step read that restart's backlog as a stall (5 → 3, then 3 → 6
        to drain its 5,900 in 10 s, where the spare of 3 drains it in ~26 s; 6 → 3 → 4 → 3 the
        same way, 2026-11-29). A change is the controller's (``last_scaled_at``), not the
        policy's decision: one the controller did not apply restarts nothing."""
        if self._scaled_at is not None and view.last_scaled_at > self._scaled_at:
            self._changed = (view.processed, None)
        self._scaled_at = view.last_scaled_at
        if view.ready < view.ready_for:
            return True
        if self._changed is None:
            return False
        processed, worked_at = self._changed
        if worked_at is None:
            if view.processed > processed:
                self._changed = (processed, view.now)
            return True
        if view.now - worked_at < self.seconds:
            return True
        self._changed = None
        return False

    def asked(self, view: PolicyInput, to: int) -> None:
        """``to`` replicas asked for, more than are ready."""
        first = self._asked[2] if self.starting(view) and self._asked is not None else view.now
        self._asked, self._asked_blind = (view.now, to, first), False
        self._had = view.ready
        self._woke_at = view.processed if view.replicas == 0 else None

    def changed(self, view: PolicyInput, to: int) -> None:
        """The count goes to ``to``. Released before all were ready: no start-up to learn from
        the ones never ready (waited for until some later count reached the old ask, a start-up
        of 58 s was learnt on the cluster), and what is still starting is the new count."""
        if self._asked is not None and to < self._asked[1]:
            when, _, first = self._asked
            self._asked = None if to <= view.ready else (when, to, first)
