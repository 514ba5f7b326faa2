"""The worker processes of ``tidal bench buffers``: one timed loop per job, ours or the bare
engine's, set up (connected, imports loaded) before the clock starts. Spawned, not forked, so a
:class:`Job` is all a worker gets; the parent (:mod:`tidal.bench.buffers`) times and reports."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidal.isb.base import BufferLimits

__all__ = ["BATCH", "LIMITS", "OURS", "PAYLOAD", "Job", "worker"]

BATCH = 1000
PAYLOAD = bytes(range(100))
OURS = ("tidal", "keyed")
LIMITS = BufferLimits(max_length=10_000_000)


@dataclass(frozen=True)
class Job:
    """What one worker process does. Picklable: workers are spawned, not forked."""

    backend: str  # "sqlite" | "jetstream"
    impl: str  # "tidal" | "keyed" | "bare" | "bare_ids" (SQLite: the bare loop plus ids)
    op: str  # "append" | "read"
    where: str  # database path or server URL
    buffer: str
    worker: int
    count: int
    first_seq: int = 1
    durability: str = "os"  # ours on SQLite (tidal.isb.durability); the layer's cost is measured
    # at "os", as the bare loop syncs nothing either; "sync" is measured against it on its own


# -- workers ------------------------------------------------------------------------------------


def worker(job: Job, barrier: Any, results: Any) -> None:
    try:
        run, close = _setup(job)
        try:
            barrier.wait(60)
            cpu0, t0 = time.process_time(), time.perf_counter()
            done = run()
            t1, cpu1 = time.perf_counter(), time.process_time()
        finally:
            close()
        results.put((job.worker, t0, t1, cpu1 - cpu0, done, None))
    except Exception as exc:  # reported to the parent, which raises
        results.put((job.worker, 0.0, 0.0, 0.0, 0, f"{type(exc).__name__}: {exc}"))


Loop = tuple[Callable[[], int], Callable[[], None]]  # (the timed loop, teardown)


def _ids(job: Job, start: int, n: int) -> list[str]:
    return [f"w{job.worker}-{i}" for i in range(start, start + n)]


def _setup(job: Job) -> Loop:
    """Connect and prepare outside the timed section; return the timed loop and its teardown."""
    if job.backend == "sqlite":
        return _sqlite_tidal(job) if job.impl in OURS else _sqlite_bare(job)
    return _jetstream_tidal(job) if job.impl in OURS else _jetstream_bare(job)


def _batches(job: Job) -> list[tuple[int, int]]:
    return [(i, min(BATCH, job.count - i)) for i in range(0, job.count, BATCH)]


def _sqlite_tidal(job: Job) -> Loop:
    from tidal.isb.sqlite import SqliteStore

    return _tidal(job, SqliteStore(job.where, durability="sync" if job.durability == "sync" else "os"))


def _tidal(job: Job, store: Any) -> Loop:
    """Our layer, either backend, through the protocol. ``tidal``: ``append`` (per-message ids)
    and ``read_range`` (tuples). ``keyed``: ``append_batch`` (one key per batch, the ids stored
    with the messages) and ``read_batch`` (Arrow), which is what the runtime uses."""
    from tidal.isb import segments

    # Imports happen before the clock starts: Arrow's IPC and numpy load on first use.
    segments.with_seqs(segments.decode(segments.encode(segments.as_segment(["w"], [b"w"]))), 1)
    buffer = store.open(job.buffer)
    batches = _batches(job)
    if job.op == "append":
        prepared = [([PAYLOAD] * n, _ids(job, i, n)) for i, n in batches]
        if job.impl == "keyed":

            def append_keyed() -> int:
                return sum(
                    buffer.append_batch(f"w{job.worker}-{k}", ids, payloads).appended
                    for k, (payloads, ids) in enumerate(prepared)
                )

            return append_keyed, store.close

        def append() -> int:
            return sum(buffer.append(payloads, ids).appended for payloads, ids in prepared)

        return append, store.close

    if job.impl == "keyed":

        def read_arrow() -> int:
            return sum(
                buffer.read_batch(job.first_seq + i, job.first_seq + i + n - 1).num_rows for i, n in batches
            )

        return read_arrow, store.close

    def read() -> int:
        got = 0
        for i, n in batches:
            for _ in buffer.read_range(job.first_seq + i, job.first_seq + i + n - 1):
                got += 1
        return got

    return read, store.close


def _sqlite_bare(job: Job) -> Loop:
    """The probe's loop (``shared/probes/sqlite_isb.py``); with ``bare_ids``, also an id column
    with a UNIQUE index and reads of that column: the least any per-message de-duplication
    costs the engine."""
    db = sqlite3.connect(job.where, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    table = f'"{job.buffer}"'
    batches = _batches(job)
    with_ids = job.impl == "bare_ids"
    rows: list[list[tuple[str, bytes]]] | list[list[tuple[bytes]]]
    if job.op == "append":
        if with_ids:
            insert = f"INSERT INTO {table} (id, payload) VALUES (?, ?)"
            rows = [list(zip(_ids(job, i, n), [PAYLOAD] * n, strict=True)) for i, n in batches]
        else:
            insert = f"INSERT INTO {table} (payload) VALUES (?)"
            rows = [[(PAYLOAD,)] * n for _, n in batches]
        bounds = f"SELECT (SELECT min(seq) FROM {table}), (SELECT max(seq) FROM {table})"

        def append() -> int:
            for batch in rows:
                db.execute("BEGIN IMMEDIATE")
                lo, hi = db.execute(bounds).fetchone()
                if lo is not None and hi - lo + 1 + len(batch) > LIMITS.max_length:
                    raise RuntimeError("full")
                db.executemany(insert, batch)
                db.execute("SELECT last_insert_rowid()").fetchone()
                db.execute("COMMIT")
            return job.count

        return append, db.close

    columns = "seq, id, payload" if with_ids else "seq, payload"
    query = f"SELECT {columns} FROM {table} WHERE seq BETWEEN ? AND ? ORDER BY seq"

    def read() -> int:
        got = 0
        for i, n in batches:
            first = job.first_seq + i
            for _ in db.execute(query, (first, first + n - 1)).fetchall():
                got += 1
        return got

    return read, db.close


def _jetstream_tidal(job: Job) -> Loop:
    from tidal.isb.jetstream import JetStreamStore

    return _tidal(job, JetStreamStore(job.where, "bench"))


def _jetstream_bare(job: Job) -> Loop:
    import nats

    loop = asyncio.new_event_loop()
    nc = loop.run_until_complete(nats.connect(job.where, pending_size=64 * 1024 * 1024))
    subject = f"tidal.bench.{job.buffer}"
    stream = f"TIDAL_bench_{job.buffer}"
    batches = _batches(job)

    async def append_all() -> int:
        for _, n in batches:
            batch_id = uuid.uuid4().hex
            await nc.request(
                subject, PAYLOAD, headers={"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": "1"}, timeout=10
            )
            for j in range(2, n):
                await nc.publish(
                    subject, PAYLOAD, headers={"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(j)}
                )
            reply = await nc.request(
                subject,
                PAYLOAD,
                headers={"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(n), "Nats-Batch-Commit": "1"},
                timeout=10,
            )
            if b'"error"' in reply.data:
                raise RuntimeError(reply.data.decode())
        return job.count

    async def direct_get(seq: int, batch: int) -> int:
        got = 0
        done = asyncio.get_running_loop().create_future()

        async def on_message(msg: Any) -> None:
            nonlocal got
            if msg.headers and "Status" in msg.headers:
                if not done.done():
                    done.set_result(None)
                return
            got += 1
            if got >= batch and not done.done():
                done.set_result(None)

        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox, cb=on_message)
        await nc.publish(
            f"$JS.API.DIRECT.GET.{stream}", json.dumps({"seq": seq, "batch": batch}).encode(), reply=inbox
        )
        await asyncio.wait_for(done, 10)
        await sub.unsubscribe()
        return got

    async def read_all() -> int:
        got = 0
        for i, n in batches:
            got += await direct_get(job.first_seq + i, n)
        return got

    def close() -> None:
        loop.run_until_complete(nc.close())
        loop.close()

    if job.op == "append":
        return (lambda: loop.run_until_complete(append_all())), close
    return (lambda: loop.run_until_complete(read_all())), close
