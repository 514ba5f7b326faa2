"""One buffer on a JetStream stream: append, read, commit (made and opened by :mod:`tidal.isb.jetstream`).

One stream per buffer, ``max_msgs = bufferMaxLength`` with ``discard=new`` and file storage.
The calls are synchronous; a private event loop thread per process runs the nats-py client.

* **append**: a batch is published as JetStream atomic batches (ADR-50, up to 1000 messages
  each), so the server stores a chunk whole or refuses it whole; before publishing, the stream's
  length is checked so a batch that would pass ``max_length`` is refused whole with
  ``BufferFull``. Ids go in ``Nats-Msg-Id`` (the server de-duplicates within its duplicate
  window, also after the original was purged, but only until it restarts: it rebuilds its ids
  from the messages it still stores). The server refuses an atomic batch containing any
  known id, so such a batch falls back to acknowledged single publishes, and the server skips
  exactly the duplicates. Batches over 1000 messages are atomic per 1000-message chunk.
* **append_batch** (per-batch de-duplication): each message's ``Nats-Msg-Id`` is
  ``<key>#<i>`` and its own id travels in a ``Tidal-Id`` header; the server then skips a
  replayed batch message by message; and a marker per batch (:mod:`tidal.isb.jetstream_appended`)
  recognises a replay after the server restarted. Messages stay one stream message each: JetStream's
  sequences are the buffer's sequences, and ``max_msgs`` bounds messages, not batches.
* **read**: batched direct get by sequence (stateless, replayable).
* **commit**: purge the stream below ``seq + 1``; the stream's first sequence is the commit point.

Traps avoided (measured, ``shared/design.md``): nats-py ``publish_async`` never completes a
refused publish, and publishing without waiting for acks lost messages, so every publish here is
acknowledged; ``fetch`` is slow, so reads are hand-written direct-get requests.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

import pyarrow as pa

from tidal import errors
from tidal.isb import segments
from tidal.isb.base import AppendResult, BufferLimits, BufferStats, Message, check_batch
from tidal.isb.jetstream_appended import AppendedBatches
from tidal.isb.jetstream_config import REQUEST_TIMEOUT

T = TypeVar("T")


class Store(Protocol):
    """What a buffer uses of its :class:`~tidal.isb.jetstream.JetStreamStore` (no import back)."""

    pipeline: str
    replicas: int

    @property
    def nc(self) -> Any: ...

    def run(self, coro: Coroutine[Any, Any, T]) -> T: ...

    def call(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T: ...


__all__ = ["JetStreamBuffer"]

_ATOMIC_MAX = 1000
# How long an append publishes again through "no responders" (:meth:`JetStreamBuffer._atomic_answered`):
# within the store's wait for one call (3 × REQUEST_TIMEOUT), with room for the publish itself.
_NO_RESPONDER_SECONDS = REQUEST_TIMEOUT
_GAP_RETRIES = 20  # reads of a range that came back short (about 20 s in all, see _range)
_ERR_DUPLICATE_IN_BATCH = 10201
_ERR_MAX_MESSAGES = 10077
_ERR_MAX_PAYLOAD = "maximum payload"


class JetStreamBuffer:
    """One buffer: a JetStream stream."""

    def __init__(self, store: Store, name: str, stream: str, limits: BufferLimits) -> None:
        self._store = store
        self._name = name
        self._stream = stream
        self._subject = f"tidal.{store.pipeline}.{name}"
        self._limits = limits
        self._appended = AppendedBatches(store, name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def limits(self) -> BufferLimits:
        return self._limits

    # -- state ---------------------------------------------------------------------------------

    async def _state(self) -> Any:
        from nats.js.errors import NotFoundError

        try:
            return (await self._store.nc.jsm().stream_info(self._stream)).state
        except NotFoundError:
            raise errors.BufferNotFound(self._name) from None

    def stats(self) -> BufferStats:
        state = self._store.call(self._state)
        committed = max(0, state.first_seq - 1)
        return BufferStats(self._name, state.last_seq, committed, state.messages, self._limits)

    def pending(self) -> int:
        return self.stats().pending

    # -- append --------------------------------------------------------------------------------

    def append(
        self,
        payloads: Sequence[bytes],
        ids: Sequence[str],
        times: Sequence[float] | None = None,
        keys: Sequence[Sequence[str] | None] | None = None,
    ) -> AppendResult:
        check_batch(payloads, ids)
        if not payloads:
            return AppendResult(0, 0, 0, 0)
        if keys is not None and len(keys) != len(ids):
            raise TypeError(f"append: {len(keys)} keys but {len(ids)} ids (one list per message)")
        # They enter the pipeline here: at the event time their source gave them, else now.
        now = time.time()
        stamps = [{"Tidal-Time": repr(now if times is None else float(t))} for t in (times or payloads)]
        for stamp, k in zip(stamps, keys or (), strict=False):
            if k is not None:  # as append_batch stores them: JSON in Tidal-Keys, none without
                stamp["Tidal-Keys"] = json.dumps(list(k))
        state = self._store.call(self._state)  # read again through a fail-over: see _append
        return self._store.run(self._append([bytes(p) for p in payloads], list(ids), None, stamps, state))

    def append_batch(
        self, key: str, ids: Any, payloads: Any, times: Any = None, keys: Any = None
    ) -> AppendResult:
        """Per-batch de-duplication on JetStream: message ``i`` of the batch is published with
        ``Nats-Msg-Id: <key>#<i>`` (its own id travels in ``Tidal-Id``), so a replayed batch is
        skipped message by message by the server, within the same duplicate window."""
        if not isinstance(key, str) or not key:
            raise TypeError(f"append_batch: the key must be a non-empty str, got {key!r}")
        batch = segments.as_segment(ids, payloads, times, keys)
        if batch.num_rows == 0:
            return AppendResult(0, 0, 0, 0)
        id_list = batch.column(0).to_pylist()
        dedup = [f"{key}#{i}" for i in range(len(id_list))]
        # Each message's own headers: its source time, and its keys when it has some (JSON).
        stamps = [
            {"Tidal-Time": repr(t)} if k is None else {"Tidal-Time": repr(t), "Tidal-Keys": json.dumps(k)}
            for t, k in zip(batch.column(2).to_pylist(), batch.column(3).to_pylist(), strict=True)
        ]
        # Unless its marker says the buffer holds it already (:mod:`jetstream_appended`: the
        # server's own ids do not survive its restart once the messages were purged). The marker
        # and the stream's state are read before anything is published, so each is read again
        # through a fail-over for the store's whole FAILOVER_SECONDS, in calls of their own.
        held = self._store.call(lambda: self._appended.count(key))
        if held is not None:
            return AppendResult(0, 0, 0, held)
        state = self._store.call(self._state)
        payload_list = batch.column(1).to_pylist()
        result = self._store.run(self._append(payload_list, id_list, dedup, stamps, state))
        self._store.run(self._appended.record(key, len(id_list)))
        return result

    async def _append(
        self,
        payloads: list[bytes],
        ids: list[str],
        dedup: list[str] | None,
        stamps: list[dict[str, str]],
        state: Any,
    ) -> AppendResult:
        """Publish the messages with their own headers (``stamps``: the ``Tidal-Time`` source time,
        the ``Tidal-Keys`` keys), given the stream's ``state`` read just before. Nothing is
        published before that read, so the callers read it again through a fail-over, in a call
        of its own (CI, twice: the host of the stream's leader and of the meta leader lost, the
        new leaders elected 7.5 s later, the read timed out past a shorter retry and failed the
        append)."""
        if state.messages + len(payloads) > self._limits.max_length:
            raise errors.BufferFull(self._name, state.messages, len(payloads), self._limits.max_length)
        first = last = 0
        appended = duplicates = 0
        answer_by = time.monotonic() + _NO_RESPONDER_SECONDS  # for the whole append, every chunk
        for i in range(0, len(payloads), _ATOMIC_MAX):
            chunk_p, chunk_i = payloads[i : i + _ATOMIC_MAX], ids[i : i + _ATOMIC_MAX]
            chunk_d = dedup[i : i + _ATOMIC_MAX] if dedup is not None else None
            chunk_s = stamps[i : i + _ATOMIC_MAX]
            result = await self._atomic_answered(answer_by, chunk_p, chunk_i, chunk_d, chunk_s)
            if result is None:  # the chunk holds a known id: publish one by one, skipping duplicates
                result = await self._singles(chunk_p, chunk_i, chunk_d, chunk_s)
            if result.appended:
                first = first or result.first_seq
                last = result.last_seq
            appended += result.appended
            duplicates += result.duplicates
        return AppendResult(first, last, appended, duplicates)

    def _raise_for(self, reply: dict[str, Any], batch: int) -> None:
        error = reply["error"]
        code = error.get("err_code")
        text = error.get("description", "")
        if code == _ERR_MAX_MESSAGES:
            raise errors.BufferFull(self._name, -1, batch, self._limits.max_length)
        if _ERR_MAX_PAYLOAD in text:
            raise errors.MessageTooLarge(self._name, -1, int(self._store.nc.max_payload))
        raise errors.BufferError(
            f"buffer {self._name!r}: JetStream refused the publish: {text} (code {code})"
        )

    @staticmethod
    def _headers(
        ids: list[str], dedup: list[str] | None, stamps: list[dict[str, str]], j: int
    ) -> dict[str, str]:
        """Message ``j``'s de-duplication id (its own id, or its batch key), for a batch its id,
        and its source time and keys."""
        headers = {"Nats-Msg-Id": ids[j]} if dedup is None else {"Nats-Msg-Id": dedup[j], "Tidal-Id": ids[j]}
        headers.update(stamps[j])
        return headers

    async def _atomic_answered(
        self,
        deadline: float,
        payloads: list[bytes],
        ids: list[str],
        dedup: list[str] | None,
        stamps: list[dict[str, str]],
    ) -> AppendResult | None:
        """:meth:`_atomic`, published again (a new batch) while the server answers "no
        responders". That answer says no server took the request, so nothing was stored and
        publishing again is exact: unlike a timeout, which may hide a stored batch (a failed
        append fails the task, and Spark's retry de-duplicates by id). It comes while a new
        stream's subject reaches the server the client is on, or while a stream elects a leader:
        seen under load on the multi-host rig, on the first append to a stream of three replicas
        with one behind a slow, lossy link. Until ``deadline`` (monotonic), one for the whole append."""
        from nats.errors import NoRespondersError

        while True:
            try:
                return await self._atomic(payloads, ids, dedup, stamps)
            except NoRespondersError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.25)

    async def _atomic(
        self, payloads: list[bytes], ids: list[str], dedup: list[str] | None, stamps: list[dict[str, str]]
    ) -> AppendResult | None:
        nc = self._store.nc
        batch_id = uuid.uuid4().hex
        n = len(payloads)
        self._check_sizes(payloads)
        for j, payload in enumerate(payloads, 1):
            headers = {
                "Nats-Batch-Id": batch_id,
                "Nats-Batch-Sequence": str(j),
                **self._headers(ids, dedup, stamps, j - 1),
            }
            if j == n:
                headers["Nats-Batch-Commit"] = "1"
            if j in (1, n):
                reply = json.loads(
                    (await nc.request(self._subject, payload, headers=headers, timeout=REQUEST_TIMEOUT)).data
                    or b"{}"
                )
                if "error" in reply:
                    if reply["error"].get("err_code") == _ERR_DUPLICATE_IN_BATCH:
                        return None
                    self._raise_for(reply, n)
                if j == n:
                    last = int(reply["seq"])
                    return AppendResult(last - n + 1, last, n, 0)
            else:
                await nc.publish(self._subject, payload, headers=headers)
        raise AssertionError("unreachable")

    async def _singles(
        self, payloads: list[bytes], ids: list[str], dedup: list[str] | None, stamps: list[dict[str, str]]
    ) -> AppendResult:
        js = self._store.nc.jetstream()
        first = last = appended = duplicates = 0
        for j, payload in enumerate(payloads):
            try:
                ack = await js.publish(
                    self._subject,
                    payload,
                    headers=self._headers(ids, dedup, stamps, j),
                    timeout=REQUEST_TIMEOUT,
                )
            except Exception as exc:
                if "maximum messages" in str(exc):
                    raise errors.BufferFull(self._name, -1, len(payloads), self._limits.max_length) from exc
                raise
            if ack.duplicate:
                duplicates += 1
                continue
            first = first or ack.seq
            last = ack.seq
            appended += 1
        return AppendResult(first, last, appended, duplicates)

    def _check_sizes(self, payloads: list[bytes]) -> None:
        limit = int(self._store.nc.max_payload) - 1024  # headers travel in the same frame
        for payload in payloads:
            if len(payload) > limit:
                raise errors.MessageTooLarge(self._name, len(payload), limit)

    # -- read / commit -------------------------------------------------------------------------

    async def _direct_get(self, seq: int, batch: int) -> list[tuple[int, str, bytes, float, Any]]:
        """Up to ``batch`` messages from ``seq``: ``(seq, id, payload, source time, keys)``."""
        nc = self._store.nc
        out: list[tuple[int, str, bytes, float, Any]] = []
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def on_message(msg: Any) -> None:
            headers = msg.headers or {}
            if "Status" in headers:
                if not done.done():
                    done.set_result(None)
                return
            message_id = headers.get("Tidal-Id") or headers.get("Nats-Msg-Id", "")
            stamp = float(headers.get("Tidal-Time", "nan"))
            keys = json.loads(headers["Tidal-Keys"]) if "Tidal-Keys" in headers else None
            out.append((int(headers["Nats-Sequence"]), message_id, msg.data, stamp, keys))
            if len(out) >= batch and not done.done():
                done.set_result(None)

        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox, cb=on_message)
        try:
            request = json.dumps({"seq": seq, "batch": batch}).encode()
            await nc.publish(f"$JS.API.DIRECT.GET.{self._stream}", request, reply=inbox)
            await asyncio.wait_for(done, REQUEST_TIMEOUT)
        finally:
            await sub.unsubscribe()
        return out

    def read(self, after: int, limit: int) -> list[Message]:
        """Any replica may answer, and a follower that has not applied the leader's last writes
        answers with fewer: a prefix, never a gap, so the next read gets the rest (a reader
        reads on from the last it got). Only a fixed range can skip: :meth:`_range`."""
        if limit <= 0:
            return []
        return [m[:3] for m in self._store.call(lambda: self._direct_get(after + 1, limit))]

    def _range(self, first: int, last: int) -> list[tuple[int, str, bytes, float, Any]]:
        """Every message ``first..last`` still in the stream, or an error: never a silent gap.

        A direct get may be answered by any replica of the stream, and a follower behind its
        leader (a slow link, a server just back) answers with what it has: a batch read from it
        could skip messages that the leader stored. So a range that comes back short is read
        again, and what is missing between the commit point and the leader's last sequence
        (below the one, a replay finds the messages purged; past the other, nothing was written
        yet: both as they should) is an error after ``_GAP_RETRIES`` tries."""
        if last < first:
            return []
        want = last - first + 1
        for attempt in range(_GAP_RETRIES):
            messages = self._store.call(lambda: self._direct_get(first, want))
            got = [m for m in messages if m[0] <= last]
            if len(got) == want:
                return got
            stats = self.stats()  # the leader's view: what is in the stream now
            floor, top = max(first, stats.committed + 1), min(last, stats.last_seq)
            if {m[0] for m in got} >= set(range(floor, top + 1)):
                return got
            time.sleep(0.1 * (attempt + 1))  # the follower catches up
        raise errors.BufferUnavailable(
            f"buffer {self._name!r}: JetStream returned {len(got)} of messages {first}..{last}, which "
            f"its leader holds, after {_GAP_RETRIES} reads: a replica is behind its leader "
            "for longer than the reads waited. The batch fails and is read again; nothing is skipped"
        )

    def read_range(self, first: int, last: int) -> list[Message]:
        return [m[:3] for m in self._range(first, last)]

    def read_batch(self, first: int, last: int) -> Any:
        rows = self._range(first, last)
        if not rows:
            return segments.empty()
        seqs, ids, payloads, times, keys = zip(*rows, strict=True)
        return pa.RecordBatch.from_arrays(
            [
                pa.array(seqs, pa.int64()),
                pa.array(ids, pa.string()),
                pa.array(payloads, pa.binary()),
                pa.array(times, pa.float64()),
                pa.array(keys, segments.KEYS),
            ],
            schema=segments.READ_SCHEMA,
        )

    def commit(self, seq: int) -> None:
        async def purge() -> None:
            state = await self._state()
            target = min(seq, state.last_seq)
            if target >= state.first_seq:
                await self._store.nc.jsm().purge_stream(self._stream, seq=target + 1)

        self._store.call(purge)

    def committed(self) -> int:
        return self.stats().committed

    def last_seq(self) -> int:
        return self.stats().last_seq

    def verify(self) -> None:
        """Nothing to check from here: the server checks its own files when it starts."""

    def close(self) -> None:
        """Buffers share the store's connection; closing the store closes it."""
