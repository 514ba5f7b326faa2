"""Group commit for a receiver: the requests waiting at once go into the buffer as one append.

One append costs a transaction and a segment whatever its size (about 0.4 ms on SQLite,
``docs/benchmarks.md``), so appending each request alone caps a receiver near 2,500 requests/s
on an idle core. :class:`GroupWriter` runs one writer thread: while it appends one group, the
next requests queue; it then takes them all (up to ``max_messages``) as the next group. A
request is answered only after the append that holds its messages committed.

**All or nothing, per group.** A group is appended atomically to each output buffer: refused
whole when the buffer is over its usage limit (:class:`Backpressure`, answered 429) or would pass
its maximum length (``BufferFull``, 503) — nothing of any request in it is stored, and each may be
retried.

**What each request is told.** Storage is exactly once per id whatever happens; the counts in
the answer say which of *its* messages were new. When the group's append found no duplicate (the
normal case), every message was new. Otherwise the writer reads back the range it just appended
to see which ids were new; if the reader downstream already trimmed part of it, the count is
unknown and the answer says ``null``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tidal.errors import Backpressure
from tidal.isb.base import Buffer

__all__ = ["Backpressure", "GroupWriter", "Stored"]

FULL_CHECK_SECONDS = 0.05  # how stale the usage-limit check may be (the max length is exact)


@dataclass(frozen=True, slots=True)
class Stored:
    appended: int | None  # new messages of this request (None: not known, see the module doc)
    duplicates: int | None


@dataclass(slots=True)
class _Pending:
    payloads: Sequence[bytes]
    ids: Sequence[str]
    future: asyncio.Future[Stored]
    loop: asyncio.AbstractEventLoop
    event_time: float | None = None
    keys: Sequence[str] = ()  # every message's (x-numaflow-keys); empty: none


class GroupWriter:
    def __init__(self, buffers: Sequence[Buffer], max_messages: int = 10_000) -> None:
        self._buffers = list(buffers)
        self._max = max_messages
        self._queue: list[_Pending] = []
        self._cond = threading.Condition()
        self._closed = False
        self._full_checked = 0.0
        self.groups = 0  # appends made (for the statistics)
        self._thread = threading.Thread(target=self._run, name="tidal-group-commit", daemon=True)
        self._thread.start()

    async def append(
        self,
        payloads: Sequence[bytes],
        ids: Sequence[str],
        event_time: float | None = None,
        keys: Sequence[str] = (),
    ) -> Stored:
        """Store one request's messages with the group; ``event_time`` (seconds) is their source
        time, the time they are stored by default; ``keys`` are every one of its messages' keys
        (what a keyed reduce downstream groups them by), none when empty."""
        loop = asyncio.get_running_loop()
        pending = _Pending(payloads, ids, loop.create_future(), loop, event_time, keys)
        with self._cond:
            if self._closed:
                raise RuntimeError("the receiver is stopping")
            self._queue.append(pending)
            self._cond.notify()
        return await pending.future

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=10)

    # -- the writer thread ---------------------------------------------------------------------

    def _take(self) -> list[_Pending] | None:
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return None
            group: list[_Pending] = []
            count = 0
            while self._queue and (not group or count + len(self._queue[0].ids) <= self._max):
                item = self._queue.pop(0)
                group.append(item)
                count += len(item.ids)
            return group

    def _run(self) -> None:
        while (group := self._take()) is not None:
            try:
                results = self._write(group)
            except Exception as exc:  # every request of the group gets the same refusal
                for item in group:
                    item.loop.call_soon_threadsafe(_settle, item.future, None, exc)
                continue
            self.groups += 1
            for item, stored in zip(group, results, strict=True):
                item.loop.call_soon_threadsafe(_settle, item.future, stored, None)

    def _check_usage(self) -> None:
        now = time.monotonic()
        if now - self._full_checked < FULL_CHECK_SECONDS:
            return
        for buffer in self._buffers:
            stats = buffer.stats()
            if stats.full:
                raise Backpressure(
                    f"buffer {buffer.name} is over its usage limit ({stats.length} of "
                    f"{stats.limits.max_length} messages): retry later"
                )
        self._full_checked = now

    def _write(self, group: list[_Pending]) -> list[Stored]:
        self._check_usage()
        payloads = [p for item in group for p in item.payloads]
        ids = [i for item in group for i in item.ids]
        times = None
        if any(item.event_time is not None for item in group):
            now = time.time()
            times = [now if item.event_time is None else item.event_time for item in group for _ in item.ids]
        keys = None  # the common case, no request keyed: the buffer stores none, as before
        if any(item.keys for item in group):
            keys = [list(item.keys) if item.keys else None for item in group for _ in item.ids]
        results = [buffer.append(payloads, ids, times, keys) for buffer in self._buffers]
        first = results[0]
        if first.duplicates == 0:
            return [Stored(len(item.ids), 0) for item in group]
        if len(group) == 1:
            return [Stored(first.appended, first.duplicates)]
        new: set[str] = set()
        if first.appended:
            batch = self._buffers[0].read_batch(first.first_seq, first.last_seq)
            new = set(batch.column(1).to_pylist())
            if len(new) != first.appended:  # trimmed already: the counts are unknown
                return [Stored(None, None) for _ in group]
        out = []
        for item in group:
            fresh = sum(1 for i in set(item.ids) if i in new)
            new -= set(item.ids)  # an id repeated across requests is new for the first only
            out.append(Stored(fresh, len(item.ids) - fresh))
        return out


def _settle(future: asyncio.Future[Stored], stored: Stored | None, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        assert stored is not None
        future.set_result(stored)
