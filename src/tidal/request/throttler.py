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
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress

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


def choose(trackers: Sequence[Tracker], cc: int, last: int, rng: random.Random) -> tuple[Tracker | None, int]:
    """The receiver for the next request by Knative's policy for ``cc``, reserved (CC > 0), and
    the round-robin index to remember."""
    n = len(trackers)
    if n == 0:
        return None, last
    if cc == 0:
        if n == 1:
            return trackers[0], last
        a, b = rng.sample(range(n), 2)
        ta, tb = trackers[a], trackers[b]
        if ta.in_flight == tb.in_flight:
            return (ta if rng.random() < 0.5 else tb), last
        return (ta if ta.in_flight < tb.in_flight else tb), last
    if cc <= 3:
        for t in trackers:
            if t.reserve():
                return t, last
        return None, last
    start = last + 1 if last + 1 < n else 0  # the list may have shrunk: start again at 0
    for k in range(n):
        i = (start + k) % n
        if trackers[i].reserve():
            return trackers[i], i
    return None, last


class Throttler:
    """Per-source throttler: ``async with throttler.slot(timeout) as tracker`` holds a request
    until a receiver has room (``TimeoutError`` after ``timeout``; :class:`Overloaded` when
    ``max_held`` are already waiting)."""

    def __init__(self, cc: int, max_held: int, seed: int | None = None) -> None:
        self.cc = cc
        self.trackers: list[Tracker] = []
        self._last = -1
        self._rng = random.Random(seed)
        self.max_held = max_held
        self._breaker = Breaker(1, 1 << 31, initial_capacity=0)
        self._changed = asyncio.Event()

    @property
    def capacity(self) -> int:
        return self.cc * len(self.trackers) if self.cc > 0 else (1 << 31 if self.trackers else 0)

    @property
    def waiting(self) -> int:
        return self._breaker.pending - self._breaker.in_flight

    def update(self, urls: Sequence[str]) -> None:
        """The ready receivers now (sorted, as upstream sorts by IP); kept trackers keep their counts."""
        known = {t.url: t for t in self.trackers}
        self.trackers = [known.get(u) or Tracker(u, self.cc) for u in sorted(urls)]
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
                tracker, self._last = choose(self.trackers, self.cc, self._last, self._rng)
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
