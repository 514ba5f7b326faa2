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
engine. Those rows measure the layer at ``buffers.durability: os``, as the bare loops sync
nothing either.

**Durability** (:func:`durability_rows`): keyed appends (what the runtime writes, a batch of 1,000
100-byte messages) under ``sync`` and ``os`` side by side, alternating, one and two writers:
SQLite (a segment, its folder and the WAL synced per batch), and JetStream on two embedded
servers, one with ``sync_interval: always`` and one with the server's default.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import sqlite3
import statistics
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, write_result
from tidal.bench.buffer_workers import BATCH, LIMITS, OURS, PAYLOAD, Job, worker

REPEATS = 3
COUNTS = {"sqlite": 100_000, "jetstream": 40_000}
GOAL = 0.8


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
    procs = [ctx.Process(target=worker, args=(job, barrier, results)) for job in jobs]
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
            self.store: Any = SqliteStore(self.where, durability="os")
        else:
            from tidal.isb.jetstream import JetStreamStore
            from tidal.isb.natsd import NatsServer

            self.server = NatsServer(root / "nats", sync=False).start()  # the layer, as the bare loop
            self.where = self.server.url
            self.store = JetStreamStore(self.where, "bench")

    @property
    def server_pid(self) -> int | None:
        return self.server.pid if self.server else None

    def fresh(self, impl: str, tag: str) -> str:
        """A new empty buffer for ``impl``; returns the name the workers use."""
        name = f"b{tag}"
        self.store.create(name, LIMITS)
        if impl not in OURS and self.name == "sqlite":
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
        return f"{name}_bare" if impl not in OURS and self.name == "sqlite" else name

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
        b.store.create(source, LIMITS)
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


DURABILITY_COUNT = 20_000  # 20 batches a writer: a sync per batch is what is measured


def durability_rows(
    root: Path, repeats: int = REPEATS, count: int = DURABILITY_COUNT
) -> list[dict[str, Any]]:
    """Keyed appends/s under ``sync`` and ``os``, alternating in every repetition."""
    from tidal.isb.jetstream import JetStreamStore
    from tidal.isb.natsd import NatsServer
    from tidal.isb.sqlite import SqliteStore

    rows = []
    servers = {d: NatsServer(root / f"nats-{d}", sync=d == "sync").start() for d in ("sync", "os")}
    try:
        for backend in ("sqlite", "jetstream"):
            for procs in (1, 2):
                runs: dict[str, list[Run]] = {"sync": [], "os": []}
                for r in range(repeats):
                    for setting in ("sync", "os"):
                        name = f"d{setting}{procs}{r}{uuid.uuid4().hex[:6]}"
                        if backend == "sqlite":
                            where = str(root / f"durability-{setting}.db")
                            store: Any = SqliteStore(where, durability="sync" if setting == "sync" else "os")
                        else:
                            where = servers[setting].url or ""
                            store = JetStreamStore(where, "bench")
                        store.create(name, LIMITS)
                        store.close()
                        per = count // procs
                        jobs = [
                            Job(backend, "keyed", "append", where, name, w, per, durability=setting)
                            for w in range(procs)
                        ]
                        runs[setting].append(_run_jobs(jobs))
                sync = statistics.median(run.rate for run in runs["sync"])
                loose = statistics.median(run.rate for run in runs["os"])
                row = {
                    "backend": backend,
                    "processes": procs,
                    "sync_msgs_per_s": round(sync),
                    "os_msgs_per_s": round(loose),
                    "sync_over_os": round(sync / loose, 3),
                    "sync_ms_per_batch": round(1000 * BATCH / sync, 2),
                    "os_ms_per_batch": round(1000 * BATCH / loose, 2),
                }
                print(
                    f"| {backend} | {procs} | {row['sync_msgs_per_s']:,} | {row['os_msgs_per_s']:,} "
                    f"| {row['sync_over_os']:.2f} | {row['sync_ms_per_batch']} | {row['os_ms_per_batch']} |",
                    flush=True,
                )
                rows.append(row)
    finally:
        for server in servers.values():
            server.stop()
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
        print(
            "\n| durability: backend | writers | sync msg/s | os msg/s | sync / os | sync ms/batch"
            " | os ms/batch |"
        )
        print("|---|---|---|---|---|---|---|")
        durable = durability_rows(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    path = write_result(
        "buffers", {"repeats": REPEATS, "counts": COUNTS, "rows": rows, "durability": durable}, out
    )
    print(f"wrote {path}")
    return 0
