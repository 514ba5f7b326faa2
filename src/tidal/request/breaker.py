"""Knative's breaker (``pkg/queue/breaker.go``, ``spec/knative.md`` §5): a concurrency limit with
a bounded queue in front of it, on asyncio.

``Breaker(queue_depth, max_concurrency)`` admits at most ``queue_depth + max_concurrency``
requests; one more fails at once with :class:`Overloaded` (the queue-proxy answers 503 "pending
request queue full"). Admitted requests wait for one of ``capacity`` tokens. ``reserve()`` is the
activator's non-blocking variant for its per-receiver breakers: it succeeds only when a slot
**and** a token are free at once. ``update_concurrency(n)`` changes the token count at run time
(the activator's revision breaker follows the ready receivers). A ``release()`` with no
acquire or reservation behind it raises :class:`Unpaired` and changes nothing, as Knative's
semaphore panics ("release and acquire are not paired"): counted below zero, the breaker would
admit more than its capacity from then on.

One event loop owns a breaker; nothing here is thread-safe, and nothing needs to be.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tidal.errors import Overloaded, Unpaired

__all__ = ["Breaker", "Overloaded", "Unpaired"]


class Breaker:
    def __init__(self, queue_depth: int, max_concurrency: int, initial_capacity: int | None = None) -> None:
        if queue_depth <= 0:
            raise ValueError(f"queue depth must be > 0 (got {queue_depth})")
        if max_concurrency < 0:
            raise ValueError(f"max concurrency must be ≥ 0 (got {max_concurrency})")
        capacity = max_concurrency if initial_capacity is None else initial_capacity
        if not 0 <= capacity <= max_concurrency:
            raise ValueError(f"initial capacity {capacity} is outside [0, {max_concurrency}]")
        self.total_slots = queue_depth + max_concurrency
        self.capacity = capacity
        self.pending = 0  # admitted: waiting for a token or holding one
        self.in_flight = 0  # holding a token
        self._waiters: deque[asyncio.Future[None]] = deque()

    def update_concurrency(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.capacity:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def reserve(self) -> bool:
        """Take a slot and a token now, or nothing (then ``release()`` undoes a success)."""
        if self.pending >= self.total_slots or self.in_flight >= self.capacity or self._waiters:
            return False
        self.pending += 1
        self.in_flight += 1
        return True

    def release(self) -> None:
        if self.in_flight <= 0 or self.pending <= 0:
            raise Unpaired(
                f"release without a matching acquire or reserve ({self.in_flight} in flight, "
                f"{self.pending} pending): nothing was changed"
            )
        self.pending -= 1
        self.in_flight -= 1
        self._wake()

    async def acquire(self, timeout: float | None = None) -> None:
        """Take a slot (or raise :class:`Overloaded`), then wait for a token (``TimeoutError``)."""
        if self.pending >= self.total_slots:
            raise Overloaded("pending request queue full")
        self.pending += 1
        if self.in_flight < self.capacity and not self._waiters:
            self.in_flight += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.in_flight -= 1  # the token came as we gave up: hand it on
            else:
                waiter.cancel()
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            self.pending -= 1
            self._wake()
            raise

    @asynccontextmanager
    async def maybe(self, timeout: float | None = None) -> AsyncIterator[None]:
        """Run the body holding a token (Knative's ``Maybe``)."""
        await self.acquire(timeout)
        try:
            yield
        finally:
            self.release()
