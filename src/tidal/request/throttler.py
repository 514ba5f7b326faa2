"""The activator's throttler (``pkg/activator/net/throttler.go``, ``spec/knative.md`` §4.2–4.3).

Capacity = ready receivers × ``containerConcurrency``. A request first waits on the revision
breaker (that capacity; its queue is the activator's hold limit), then takes a receiver by the
load-balancing policy Knative picks from CC:

========  ======================  ============================================================
CC        policy                  behaviour
========  ======================  ============================================================
0         power of two choices    two distinct random receivers, the one with fewer requests in
                                  flight from here (a coin flip on a tie); no capacity check
1–3       first available         the first receiver, in sorted order, with a free slot
> 3       round robin             from the one after the last success, the first with a free slot
========  ======================  ============================================================

With CC 0 the revision breaker is "infinite": requests wait only while there is no receiver.
:func:`choose` is the policy alone (no event loop), so the tests pin Knative's vectors.

With several activators (``Throttler.set_activators``), each balances over its slice of the
receivers and its capacity is its slice's (:mod:`tidal.request.subsetting`, Knative's
``updateCapacity``); with CC 0 every activator sees every receiver, as upstream.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress

from tidal.request import subsetting
from tidal.request.breaker import Breaker, Overloaded

__all__ = ["Throttler", "Tracker", "choose", "policy_name"]

POD_QUEUE_DEPTH = 10_000  # each tracker's breaker, as upstream


class Tracker:
    """One ready receiver as the activator sees it: its address, its breaker (CC > 0), and the
    requests this activator has in flight on it."""

    def __init__(self, url: str, cc: int) -> None:
        self.url = url
        self.breaker = Breaker(POD_QUEUE_DEPTH, cc) if cc > 0 else None
        self.in_flight = 0

    def reserve(self) -> bool:
        if self.breaker is None:
            return True
        return self.breaker.reserve()

    def release(self) -> None:
        if self.breaker is not None:
            self.breaker.release()


def policy_name(cc: int) -> str:
    return "random-choice-2" if cc == 0 else "first-available" if cc <= 3 else "round-robin"


def choose(
    trackers: Sequence[Tracker], cc: int, index: int, rng: random.Random
) -> tuple[Tracker | None, int]:
    """The receiver for the next request by Knative's policy for ``cc``, reserved (CC > 0), and
    the round-robin index to start from next time.

    Round robin is ``newRoundRobinPolicy``: an index past the end (the list shrank) starts again
    at 0 **and stays reset even when nothing had room**; a success moves it to the one after the
    pick. Power of two choices is ``randomChoice2Policy``: with two receivers both are the
    contestants, with more two distinct random ones.
    """
    n = len(trackers)
    if n == 0:
        return None, index
    if cc == 0:
        if n == 1:
            return trackers[0], index
        a, b = rng.sample(range(n), 2) if n > 2 else (0, 1)
        ta, tb = trackers[a], trackers[b]
        if ta.in_flight == tb.in_flight:
            return (ta if rng.random() < 0.5 else tb), index
        return (ta if ta.in_flight < tb.in_flight else tb), index
    if cc <= 3:
        for t in trackers:
            if t.reserve():
                return t, index
        return None, index
    if index >= n:  # the list shrank: start again at 0 (kept, whatever comes next)
        index = 0
    for k in range(n):
        i = (index + k) % n
        if trackers[i].reserve():
            return trackers[i], i + 1
    return None, index


class Throttler:
    """Per-source throttler: ``async with throttler.slot(timeout) as tracker`` holds a request
    until a receiver has room (``TimeoutError`` after ``timeout``; :class:`Overloaded` when
    ``max_held`` are already waiting)."""

    def __init__(self, cc: int, max_held: int, seed: int | None = None) -> None:
        self.cc = cc
        self.trackers: list[Tracker] = []
        self._index = 0  # where round robin starts next (Knative's idx)
        self._rng = random.Random(seed)
        self.max_held = max_held
        self.activators = 1  # how many activators share the receivers, and this one's index
        self.index = -1  # -1: not assigned yet, balance over every receiver (upstream's start)
        self.assigned: list[Tracker] = []  # this activator's slice of the trackers
        self.capacity = 0
        self._breaker = Breaker(1, subsetting.MAX_CAPACITY, initial_capacity=0)
        self._changed = asyncio.Event()

    @property
    def waiting(self) -> int:
        return self._breaker.pending - self._breaker.in_flight

    def update(self, urls: Sequence[str]) -> None:
        """The ready receivers now (sorted, as upstream sorts by IP); kept trackers keep their counts."""
        known = {t.url: t for t in self.trackers}
        self.trackers = [known.get(u) or Tracker(u, self.cc) for u in sorted(urls)]
        self._update_capacity()

    def set_activators(self, count: int, index: int) -> None:
        """``count`` activators share the receivers and this one is ``index`` (-1: unassigned)."""
        if count < 1 or not -1 <= index < count:
            raise ValueError(f"activator index {index} is outside [-1, {count - 1}] for {count} activators")
        if (count, index) != (self.activators, self.index):
            self.activators, self.index = count, index
            self._update_capacity()

    def _update_capacity(self) -> None:
        """Knative's ``updateCapacity``: re-slice, then set the revision breaker's capacity."""
        if self.cc > 0:
            self.assigned = subsetting.assign_slice(self.trackers, self.index, self.activators)
        else:
            self.assigned = list(self.trackers)
        self.capacity = subsetting.calculate_capacity(
            self.cc, len(self.assigned), len(self.trackers), self.activators
        )
        self._breaker.update_concurrency(self.capacity)
        self._changed.set()
        self._changed = asyncio.Event()

    @asynccontextmanager
    async def slot(self, timeout: float) -> AsyncIterator[Tracker]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self.waiting >= self.max_held:
            raise Overloaded(f"{self.waiting} requests already held (maxHeld {self.max_held})")
        await self._breaker.acquire(timeout)
        try:
            while True:
                tracker, self._index = choose(self.assigned, self.cc, self._index, self._rng)
                if tracker is not None:
                    break
                # A race: capacity said yes, every receiver is full. Wait for a change or a release.
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), min(left, 0.05))
            tracker.in_flight += 1
            try:
                yield tracker
            finally:
                tracker.in_flight -= 1
                if self.cc > 0:
                    tracker.release()
        finally:
            self._breaker.release()
