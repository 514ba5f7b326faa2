"""Benchmark: buffer appends/s and range reads/s, Tidal's layer against the bare engine.

For each backend (SQLite, NATS JetStream) and for one and two processes, it measures:

* **append**: 100-byte messages in batches of 1000 (ids de-duplicated, length checked, all or
  nothing). The baseline is the bare engine doing the same batch without Tidal. For SQLite that is
  the probe's loop: ``BEGIN IMMEDIATE``, two-subselect length check, ``executemany``, ``COMMIT``,
  with no ids. For JetStream it is an ADR-50 atomic batch of 1000 with no ``Nats-Msg-Id`` and no
  length check.
  Ours comes twice: ``tidal`` is ``append`` with per-message de-duplication, ``keyed`` is
  ``append_batch`` with one de-duplication key per batch (what the runtime writes).
* **read**: ranges of 1000 by sequence over a filled buffer (``tidal``: ``read_range`` tuples;
  ``keyed``: ``read_batch``, one Arrow batch, what the runtime reads). The baseline is a bare
  ``SELECT … BETWEEN`` for SQLite, and a hand-written batched direct get for JetStream.

With two processes, both append to the same buffer, or each reads its own half. Ours and the
bare loop run alternately in every repetition, so both see the same machine. The result is the
median over the repetitions of messages/s, measured from the first worker's start to the last
worker's end. CPU µs per message counts the workers' processes, all their threads included;
for JetStream the server's CPU is reported separately.

Run: ``tidal bench buffers``. The goal (issue #4): our layer keeps at least 80 % of the bare
engine.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, write_result
from tidal.isb.base import BufferLimits

BATCH = 1000
PAYLOAD = bytes(range(100))
REPEATS = 3
COUNTS = {"sqlite": 100_000, "jetstream": 40_000}
GOAL = 0.8
_OURS = ("tidal", "keyed")
_LIMITS = BufferLimits(max_length=10_000_000)


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


# -- workers ------------------------------------------------------------------------------------


def _worker(job: Job, barrier: Any, results: Any) -> None:
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
        return _sqlite_tidal(job) if job.impl in _OURS else _sqlite_bare(job)
    return _jetstream_tidal(job) if job.impl in _OURS else _jetstream_bare(job)


def _batches(job: Job) -> list[tuple[int, int]]:
    return [(i, min(BATCH, job.count - i)) for i in range(0, job.count, BATCH)]


def _sqlite_tidal(job: Job) -> Loop:
    from tidal.isb.sqlite import SqliteStore

    return _tidal(job, SqliteStore(job.where))


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
                if lo is not None and hi - lo + 1 + len(batch) > _LIMITS.max_length:
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


# -- the parent -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    messages: int
    seconds: float
    cpu_seconds: float
    server_cpu_seconds: float | None

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


def _server_cpu(pid: int | None) -> float | None:
    """User + system CPU seconds of a process, from /proc (Linux); None elsewhere."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_jobs(jobs: list[Job], server_pid: int | None = None) -> Run:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(jobs))
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(job, barrier, results)) for job in jobs]
    for p in procs:
        p.start()
    server0 = _server_cpu(server_pid)
    got = [results.get(timeout=600) for _ in jobs]
    server1 = _server_cpu(server_pid)
    for p in procs:
        p.join(60)
    failed = [g[5] for g in got if g[5]]
    if failed:
        raise RuntimeError(f"benchmark worker failed: {failed[0]}")
    start, end = min(g[1] for g in got), max(g[2] for g in got)
    messages = sum(g[4] for g in got)
    expected = sum(job.count for job in jobs)
    if messages != expected:
        raise RuntimeError(f"workers handled {messages} messages, expected {expected}")
    server = None if server0 is None or server1 is None else server1 - server0
    return Run(messages, end - start, sum(g[3] for g in got), server)


class _Backend:
    """Creates fresh buffers (ours) and bare tables/streams, and fills them for reading."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.server: Any = None
        if name == "sqlite":
            from tidal.isb.sqlite import SqliteStore

            self.where = str(root / "bench.db")
            self.store: Any = SqliteStore(self.where)
        else:
            from tidal.isb.jetstream import JetStreamStore
            from tidal.isb.natsd import NatsServer

            self.server = NatsServer(root / "nats").start()
            self.where = self.server.url
            self.store = JetStreamStore(self.where, "bench")

    @property
    def server_pid(self) -> int | None:
        return self.server.pid if self.server else None

    def fresh(self, impl: str, tag: str) -> str:
        """A new empty buffer for ``impl``; returns the name the workers use."""
        name = f"b{tag}"
        self.store.create(name, _LIMITS)
        if impl not in _OURS and self.name == "sqlite":
            id_column = "id TEXT NOT NULL UNIQUE, " if impl == "bare_ids" else ""
            db = sqlite3.connect(self.where, isolation_level=None)
            db.execute(
                f'CREATE TABLE "{name}_bare" '
                f"(seq INTEGER PRIMARY KEY AUTOINCREMENT, {id_column}payload BLOB NOT NULL)"
            )
            db.close()
            return f"{name}_bare"
        return name  # bare JetStream publishes into the same kind of stream, without Tidal

    def fill(self, name: str, count: int) -> int:
        """Append ``count`` messages through Tidal; return the first sequence."""
        buffer = self.store.open(name)
        first = 0
        for i in range(0, count, BATCH):
            n = min(BATCH, count - i)
            result = buffer.append([PAYLOAD] * n, [f"fill-{j}" for j in range(i, i + n)])
            first = first or result.first_seq
        return first

    def fill_bare(self, name: str, count: int) -> None:
        """The same messages in a bare SQLite table (a row per message, ids included) for the bare reads."""
        db = sqlite3.connect(self.where, isolation_level=None)
        db.execute(
            f'CREATE TABLE "{name}_bare" (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,'
            " payload BLOB NOT NULL)"
        )
        db.execute("BEGIN")
        db.executemany(
            f'INSERT INTO "{name}_bare" (id, payload) VALUES (?, ?)',
            ((f"fill-{j}", PAYLOAD) for j in range(count)),
        )
        db.execute("COMMIT")
        db.close()

    def read_name(self, impl: str, name: str) -> str:
        return f"{name}_bare" if impl not in _OURS and self.name == "sqlite" else name

    def close(self) -> None:
        self.store.close()
        if self.server is not None:
            self.server.stop()


def measure(backend: str, root: Path, repeats: int = REPEATS) -> list[dict[str, Any]]:
    count = COUNTS[backend]
    b = _Backend(backend, root)
    rows: list[dict[str, Any]] = []
    try:
        source = f"read{uuid.uuid4().hex[:6]}"
        b.store.create(source, _LIMITS)
        first = b.fill(source, count)
        if backend == "sqlite":
            b.fill_bare(source, count)  # numbered from 1, like ours
        for op in ("append", "read"):
            for procs in (1, 2):
                impls = (
                    ("tidal", "keyed", "bare", "bare_ids")
                    if backend == "sqlite"
                    else ("tidal", "keyed", "bare")
                )
                runs: dict[str, list[Run]] = {impl: [] for impl in impls}
                for r in range(repeats):
                    for impl in impls:
                        per = count // procs
                        if op == "append":
                            name = b.fresh(impl, f"{impl}{procs}{r}{uuid.uuid4().hex[:6]}")
                            jobs = [Job(backend, impl, op, b.where, name, w, per) for w in range(procs)]
                        else:
                            name = b.read_name(impl, source)
                            jobs = [
                                Job(backend, impl, op, b.where, name, w, per, first + w * per)
                                for w in range(procs)
                            ]
                        runs[impl].append(_run_jobs(jobs, b.server_pid))
                rows.append(_summarise(backend, op, procs, runs))
                _print_row(rows[-1])
    finally:
        b.close()
    return rows


def _summarise(backend: str, op: str, procs: int, runs: dict[str, list[Run]]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "backend": backend,
        "op": op,
        "processes": procs,
        "batch": BATCH,
        "payload_bytes": 100,
    }
    for impl, rs in runs.items():
        row[f"{impl}_msgs_per_s"] = round(statistics.median([r.rate for r in rs]))
        row[f"{impl}_cpu_us_per_msg"] = round(
            statistics.median([r.cpu_seconds / r.messages * 1e6 for r in rs]), 2
        )
        servers = [r.server_cpu_seconds for r in rs if r.server_cpu_seconds is not None]
        if backend == "jetstream" and servers:
            row[f"{impl}_server_cpu_us_per_msg"] = round(
                statistics.median([s / rs[0].messages * 1e6 for s in servers]), 2
            )
        row[f"{impl}_all_msgs_per_s"] = [round(r.rate) for r in rs]
    row["ratio"] = round(row["tidal_msgs_per_s"] / row["bare_msgs_per_s"], 3)
    row["ratio_keyed"] = round(row["keyed_msgs_per_s"] / row["bare_msgs_per_s"], 3)
    if "bare_ids_msgs_per_s" in row:
        row["ratio_ids"] = round(row["tidal_msgs_per_s"] / row["bare_ids_msgs_per_s"], 3)
    row["meets_goal"] = row["ratio"] >= GOAL
    row["keyed_meets_goal"] = row["ratio_keyed"] >= GOAL
    return row


_HEADER = (
    "| backend | op | procs | keyed msg/s | keyed / bare | Tidal msg/s | Tidal / bare | bare msg/s "
    "| bare+ids msg/s | Tidal / bare+ids | keyed CPU µs/msg | Tidal CPU µs/msg | bare CPU µs/msg |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _print_row(row: dict[str, Any]) -> None:
    with_ids = f"{row['bare_ids_msgs_per_s']:,} | {row['ratio_ids']:.0%}" if "ratio_ids" in row else "– | –"
    print(
        f"| {row['backend']} | {row['op']} | {row['processes']} | {row['keyed_msgs_per_s']:,} "
        f"| {row['ratio_keyed']:.0%} | {row['tidal_msgs_per_s']:,} | {row['ratio']:.0%} "
        f"| {row['bare_msgs_per_s']:,} | {with_ids} | {row['keyed_cpu_us_per_msg']} "
        f"| {row['tidal_cpu_us_per_msg']} | {row['bare_cpu_us_per_msg']} |",
        flush=True,
    )


def main(out: Path = RESULTS, backends: tuple[str, ...] = ("sqlite", "jetstream")) -> int:
    root = Path(tempfile.mkdtemp(prefix="tidal-bench-"))
    print(_HEADER, flush=True)
    try:
        rows = [row for backend in backends for row in measure(backend, root)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    path = write_result("buffers", {"repeats": REPEATS, "counts": COUNTS, "rows": rows}, out)
    print(f"wrote {path}")
    return 0
