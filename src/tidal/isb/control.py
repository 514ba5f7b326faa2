"""The control record: desired replicas per vertex, and what each micro-batch did.

It lives in the pipeline's SQLite database because the readers that consult it run in Python
processes the JVM starts (not in the driver's), so state is shared through the file, not through
Python objects (``shared/design.md``). What goes through it:

- ``replicas``: written by the controller, read by the vertex's reader at every micro-batch.
- ``plans``: the input range of the micro-batch a vertex's reader admitted last, and its split
  into partitions. Spark runs a query's micro-batches one after the other, so when the writer
  commits, the last plan is the batch it commits: the writer trims the input to its end and
  counts its messages as processed (a filter writes fewer rows than it read, so the output
  cannot tell). A replay of the same range reuses the split, so its tasks write the same
  de-duplication keys as before.
- ``batches``: one row per committed micro-batch: its tasks (the replicas that really ran),
  messages in and out, the seconds its tasks spent working (``busy``) and, for a sink, the
  delivery delays of its messages (``delays``: a :class:`~tidal.scaling.latency.DelaySample`).
- ``replica_reads``: messages each replica (read partition ``i`` of a batch) has read so far, kept
  in the same transaction as the batch (a replay replaces its own counts): Numaflow's per-pod read
  counts (``getPodReadCounts``), which its rater reads per pod for a MonoVertex.
- ``reports``: what a source's reader saw of its source (its ``pending()``, or why it is not
  available), for the controller in the driver process.
- ``meta``: small facts of the run that must survive a restart (the generator's start time, a
  Kafka source's last micro-batch and its split into tasks).
- ``claims``: the room in a buffer that several vertices write (a join's input) each writer's
  admitted micro-batch may fill (:meth:`ControlStore.claiming`, :mod:`tidal.spark.batch.admission`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tidal.isb.durability import DEFAULT, Durability
from tidal.isb.sqlite import SqliteStore
from tidal.scaling.latency import DelaySample

__all__ = ["BatchRange", "BatchRecord", "ControlStore", "MemberBatch", "RoomClaims", "SourceReport"]


@dataclass(frozen=True, slots=True)
class BatchRecord:
    vertex: str
    batch_id: int
    tasks: int
    rows: int  # messages read from the input
    at: float
    written: int = 0  # messages written to the outputs (a filter writes fewer, a flatmap more)
    busy: float = 0.0  # seconds its tasks spent working (reading, the UDF, writing), summed


@dataclass(frozen=True, slots=True)
class MemberBatch:
    """What a chained vertex (past its chain's head) did in the head's micro-batch
    (:mod:`tidal.spec.chains`): recorded under its own name, so status shows every vertex."""

    vertex: str
    rows: int  # messages its function got
    written: int  # messages it passed on (or delivered, for the chain's sink)
    busy: float = 0.0  # seconds its own step took, summed over the tasks
    dead: int = 0
    delays: DelaySample | None = None  # the chain's sink: delivery delays
    dropped: int = 0  # all of them (see ControlStore.drops for the reasons)
    full: int = 0  # at a full onFull: discardLatest buffer
    exhausted: int = 0  # by its routed sink, after its retries


def _delay_text(delays: DelaySample | None) -> str | None:
    if delays is None or not delays.count:
        return None
    return json.dumps({"n": delays.count, "p": [round(p, 4) for p in delays.points]})


@dataclass(frozen=True, slots=True)
class BatchRange:
    """A micro-batch's input range: sequences ``first..last`` (empty when ``last < first``)."""

    first: int
    last: int
    parts: tuple[tuple[int, int], ...] = ()  # the partitions' ranges, in order

    @property
    def count(self) -> int:
        # Buffer and generator sequences are contiguous: the range holds exactly this many.
        return max(0, self.last - self.first + 1)


@dataclass(frozen=True, slots=True)
class SourceReport:
    """A source's ``pending()`` as its reader last saw it; ``pending`` None = not available."""

    pending: float | None
    error: str
    at: float


class RoomClaims:
    """The claims on buffers' room, read and written inside one write transaction
    (:meth:`ControlStore.claiming`), so two writers never plan on the same room."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def others(self, buffer: str, writer: str) -> int:
        """The room in ``buffer`` the batches of its writers other than ``writer`` claimed."""
        row = self._db.execute(
            "SELECT coalesce(sum(n), 0) FROM claims WHERE buffer=? AND writer<>?", (buffer, writer)
        ).fetchone()
        return int(row[0])

    def claim(self, buffers: Sequence[str], writer: str, n: int) -> None:
        """``writer``'s batch may write ``n`` messages into each of ``buffers``; it replaces the
        writer's last claim (that batch has landed: a vertex's batches run one by one)."""
        self._db.executemany(
            "INSERT OR REPLACE INTO claims VALUES (?, ?, ?)", [(b, writer, max(0, n)) for b in buffers]
        )


class ControlStore:
    def __init__(self, path: str | Path, durability: Durability = DEFAULT) -> None:
        # The plans must outlive a power cut as the buffers do (a replay reuses its split, and
        # so its de-duplication keys): one file, one WAL, one setting.
        self._store = SqliteStore(path, durability=durability)
        with self._store.transaction() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS control (vertex TEXT PRIMARY KEY, replicas INTEGER NOT NULL, "
                "updated REAL NOT NULL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS batches (vertex TEXT NOT NULL, batch_id INTEGER NOT NULL, "
                "tasks INTEGER NOT NULL, rows INTEGER NOT NULL, at REAL NOT NULL, "
                "written INTEGER NOT NULL DEFAULT 0, busy REAL NOT NULL DEFAULT 0, "
                "dead INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (vertex, batch_id))"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS plans (vertex TEXT PRIMARY KEY, first INTEGER NOT NULL, "
                "last INTEGER NOT NULL, parts TEXT NOT NULL DEFAULT '[]')"
            )
            if "parts" not in {row[1] for row in db.execute("PRAGMA table_info(plans)")}:
                db.execute("ALTER TABLE plans ADD COLUMN parts TEXT NOT NULL DEFAULT '[]'")  # an older run
            columns = {row[1] for row in db.execute("PRAGMA table_info(batches)")}
            if "busy" not in columns:
                db.execute("ALTER TABLE batches ADD COLUMN busy REAL NOT NULL DEFAULT 0")  # an older run
            if "dead" not in columns:
                db.execute("ALTER TABLE batches ADD COLUMN dead INTEGER NOT NULL DEFAULT 0")
            if "delays" not in columns:
                db.execute("ALTER TABLE batches ADD COLUMN delays TEXT")
            if "parts" not in columns:
                db.execute("ALTER TABLE batches ADD COLUMN parts TEXT")
            if "dropped" not in columns:  # conditional forwarding's drops
                db.execute("ALTER TABLE batches ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0")
            if "peak_rss" not in columns:  # what the tasks used: the vertical recommendations' input
                db.execute("ALTER TABLE batches ADD COLUMN peak_rss REAL")
                db.execute("ALTER TABLE batches ADD COLUMN cpu REAL")
            if "retried" not in columns:  # a routed sink's retried writes (tidal.scaling.sink_health)
                db.execute("ALTER TABLE batches ADD COLUMN retried INTEGER NOT NULL DEFAULT 0")
            if "dropped_full" not in columns:  # the drops' reasons (ControlStore.drops)
                db.execute("ALTER TABLE batches ADD COLUMN dropped_full INTEGER NOT NULL DEFAULT 0")
                db.execute("ALTER TABLE batches ADD COLUMN dropped_exhausted INTEGER NOT NULL DEFAULT 0")
            db.execute(
                "CREATE TABLE IF NOT EXISTS replica_reads (vertex TEXT NOT NULL, replica INTEGER NOT NULL, "
                "count INTEGER NOT NULL, PRIMARY KEY (vertex, replica))"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS reports (vertex TEXT PRIMARY KEY, pending REAL, "
                "error TEXT NOT NULL, at REAL NOT NULL)"
            )
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute(
                "CREATE TABLE IF NOT EXISTS claims (buffer TEXT NOT NULL, writer TEXT NOT NULL, "
                "n INTEGER NOT NULL, PRIMARY KEY (buffer, writer))"
            )
            if "version" not in {row[1] for row in db.execute("PRAGMA table_info(control)")}:
                db.execute("ALTER TABLE control ADD COLUMN version INTEGER NOT NULL DEFAULT 1")

    def set_replicas(self, vertex: str, replicas: int) -> int:
        """Set the replicas the vertex's reader takes at its next micro-batch; returns the
        record's version, which bumps at every change (the scale subresource's resourceVersion)."""
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0, got {replicas}")
        with self._store.transaction() as db:
            db.execute(
                "INSERT INTO control (vertex, replicas, updated, version) VALUES (?, ?, ?, 1) "
                "ON CONFLICT(vertex) DO UPDATE SET replicas=excluded.replicas, updated=excluded.updated, "
                "version=version + (replicas != excluded.replicas)",
                (vertex, replicas, time.time()),
            )
            row = db.execute("SELECT version FROM control WHERE vertex=?", (vertex,)).fetchone()
        return int(row[0])

    def phase(self) -> str:
        """The pipeline's lifecycle phase: ``Running``, ``Pausing`` or ``Paused`` (kept across
        restarts: a run started again on a paused directory stays paused)."""
        return self.meta("lifecycle:phase") or "Running"

    def set_phase(self, phase: str) -> None:
        self.set_meta("lifecycle:phase", phase)

    def set_read_batch_size(self, size: int) -> None:
        """A live edit of ``limits.readBatchSize``: admission takes it from the next micro-batch."""
        self.set_meta("limits:readBatchSize", str(size))

    def read_batch_size(self, default: int) -> int:
        """``limits.readBatchSize`` as the run has it now (``default``: the spec's at start)."""
        value = self.meta("limits:readBatchSize")
        return int(value) if value else default

    def usage(
        self, vertex: str, after: int = -1
    ) -> list[tuple[int, float, float | None, float | None, float, int]]:
        """The committed batches of ``vertex`` past batch ``after`` that measured what their tasks
        used: ``(batch_id, at, peak_rss bytes, cpu seconds, busy seconds, tasks)``, in order."""
        rows = self._store.db.execute(
            "SELECT batch_id, at, peak_rss, cpu, busy, tasks FROM batches WHERE vertex=? AND batch_id>? "
            "AND rows > 0 AND (peak_rss IS NOT NULL OR cpu IS NOT NULL) ORDER BY batch_id",
            (vertex, after),
        ).fetchall()
        return [(int(r[0]), float(r[1]), r[2], r[3], float(r[4]), int(r[5])) for r in rows]

    def replicas_version(self, vertex: str) -> int:
        """The version of the vertex's replicas (0: never set)."""
        row = self._store.db.execute("SELECT version FROM control WHERE vertex=?", (vertex,)).fetchone()
        return int(row[0]) if row else 0

    def replicas(self, vertex: str, default: int = 1) -> int:
        row = self._store.db.execute("SELECT replicas FROM control WHERE vertex=?", (vertex,)).fetchone()
        return int(row[0]) if row else default

    def set_closing(self, vertex: str, closing: bool) -> None:
        """Mark a source as closing: its reader admits nothing more, so the batch in flight is
        the last and a stop that follows lands between two batches (a stop mid-batch leaves what
        the tasks wrote downstream uncounted by the source until the replay)."""
        self.set_meta(f"closing:{vertex}", "1" if closing else "")

    def closing(self, vertex: str) -> bool:
        return bool(self.meta(f"closing:{vertex}"))

    def record_batch(
        self,
        vertex: str,
        batch_id: int,
        tasks: int,
        rows: int,
        written: int = 0,
        *,
        busy: float = 0.0,
        dead: int = 0,
        delays: DelaySample | None = None,
        parts: Sequence[int] = (),
        members: Sequence[MemberBatch] = (),
        peak_rss: float | None = None,
        cpu: float | None = None,
        dropped: int = 0,
        retried: int = 0,
        full: int = 0,
        exhausted: int = 0,
    ) -> None:
        """A committed micro-batch; recording the same batch again (a replay) replaces it.

        ``parts``: the messages each replica read (partition ``i`` of the batch); what they do
        not account for of ``rows`` is counted for replica 0. ``members``: a chain's other
        vertices, recorded in the same transaction with the same tasks and batch id."""
        delay_text = _delay_text(delays)
        reads = [max(0, int(n)) for n in parts] or [0]
        reads[0] += max(0, rows - sum(reads))
        with self._store.transaction() as db:
            old = db.execute(
                "SELECT parts FROM batches WHERE vertex=? AND batch_id=?", (vertex, batch_id)
            ).fetchone()
            if old is not None and old[0]:  # a replay: take its first recording back
                for replica, count in enumerate(json.loads(old[0])):
                    db.execute(
                        "UPDATE replica_reads SET count = count - ? WHERE vertex=? AND replica=?",
                        (count, vertex, replica),
                    )
            for replica, count in enumerate(reads):
                db.execute(
                    "INSERT INTO replica_reads (vertex, replica, count) VALUES (?, ?, ?) "
                    "ON CONFLICT(vertex, replica) DO UPDATE SET count = count + excluded.count",
                    (vertex, replica, count),
                )
            db.execute(
                "INSERT OR REPLACE INTO batches (vertex, batch_id, tasks, rows, at, written, busy, dead, "
                "delays, parts, peak_rss, cpu, dropped, retried, dropped_full, dropped_exhausted) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    vertex,
                    batch_id,
                    tasks,
                    rows,
                    time.time(),
                    written,
                    busy,
                    dead,
                    delay_text,
                    json.dumps(reads),
                    peak_rss,
                    cpu,
                    dropped,
                    retried,
                    full,
                    exhausted,
                ),
            )
            now = time.time()
            for m in members:
                db.execute(
                    "INSERT OR REPLACE INTO batches (vertex, batch_id, tasks, rows, at, written, busy, dead, "
                    "delays, parts, dropped, dropped_full, dropped_exhausted) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)",
                    (
                        m.vertex,
                        batch_id,
                        tasks,
                        m.rows,
                        now,
                        m.written,
                        m.busy,
                        m.dead,
                        _delay_text(m.delays),
                        m.dropped,
                        m.full,
                        m.exhausted,
                    ),
                )

    def delivering(self) -> list[str]:
        """The vertices that recorded delivery delays (the sinks that delivered something)."""
        rows = self._store.db.execute("SELECT DISTINCT vertex FROM batches WHERE delays IS NOT NULL")
        return sorted(row[0] for row in rows)

    def delays(self, vertex: str, since: float = 0.0) -> list[DelaySample]:
        """The delivery delays of the sink ``vertex``'s batches committed at or after ``since``."""
        rows = self._store.db.execute(
            "SELECT at, delays FROM batches WHERE vertex=? AND at >= ? AND delays IS NOT NULL ORDER BY at",
            (vertex, since),
        ).fetchall()
        out = []
        for at, text in rows:
            data = json.loads(text)
            out.append(DelaySample(float(at), int(data["n"]), tuple(float(p) for p in data["p"])))
        return out

    def dead_letters(self, vertex: str) -> int:
        """Messages the vertex sent to its dead letter, over its committed batches."""
        row = self._store.db.execute(
            "SELECT coalesce(sum(dead), 0) FROM batches WHERE vertex=?", (vertex,)
        ).fetchone()
        return int(row[0])

    def dropped(self, vertex: str) -> int:
        """Messages the vertex dropped (tagged DROP, or taken by no output edge), over its
        committed batches."""
        row = self._store.db.execute(
            "SELECT coalesce(sum(dropped), 0) FROM batches WHERE vertex=?", (vertex,)
        ).fetchone()
        return int(row[0])

    def drops(self, vertex: str) -> dict[str, int]:
        """The vertex's drops by reason, as Numaflow's ``forwarder_drop_total`` labels them:
        ``tags`` (tagged DROP, or no output edge's conditions matched), ``buffer-full`` (an
        ``onFull: discardLatest`` edge), ``sink-retries-exhausted`` (``onFailure: drop``). Only
        the reasons with drops."""
        row = self._store.db.execute(
            "SELECT coalesce(sum(dropped), 0), coalesce(sum(dropped_full), 0), "
            "coalesce(sum(dropped_exhausted), 0) FROM batches WHERE vertex=?",
            (vertex,),
        ).fetchone()
        total, full, exhausted = int(row[0]), int(row[1]), int(row[2])
        out = {"tags": total - full - exhausted, "buffer-full": full, "sink-retries-exhausted": exhausted}
        return {reason: n for reason, n in out.items() if n}

    def sink_retried(self, vertex: str) -> int:
        """Message writes its routed sink retried, over its committed batches (a chain's are its
        head's: the replicas that wrote them)."""
        row = self._store.db.execute(
            "SELECT coalesce(sum(retried), 0) FROM batches WHERE vertex=?", (vertex,)
        ).fetchone()
        return int(row[0])

    def set_batch_range(
        self, vertex: str, first: int, last: int, parts: Sequence[tuple[int, int]] = ()
    ) -> None:
        with self._store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO plans VALUES (?, ?, ?, ?)",
                (vertex, first, last, json.dumps([list(p) for p in parts])),
            )

    def batch_range(self, vertex: str) -> BatchRange | None:
        """The micro-batch the vertex's reader admitted last, with its split into tasks."""
        row = self._store.db.execute(
            "SELECT first, last, parts FROM plans WHERE vertex=?", (vertex,)
        ).fetchone()
        if row is None:
            return None
        parts = tuple((int(a), int(b)) for a, b in json.loads(row[2]))
        return BatchRange(int(row[0]), int(row[1]), parts)

    def report_source(self, vertex: str, pending: float | None, error: str = "") -> None:
        with self._store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO reports VALUES (?, ?, ?, ?)", (vertex, pending, error, time.time())
            )

    def source_report(self, vertex: str) -> SourceReport | None:
        row = self._store.db.execute(
            "SELECT pending, error, at FROM reports WHERE vertex=?", (vertex,)
        ).fetchone()
        return (
            SourceReport(None if row[0] is None else float(row[0]), str(row[1]), float(row[2]))
            if row
            else None
        )

    def setdefault_meta(self, key: str, value: str) -> str:
        """Store ``value`` under ``key`` unless one is there; return the stored one (kept over restarts)."""
        with self._store.transaction() as db:
            db.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (key, value))
            return str(db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()[0])

    def mark_throttled(self, vertex: str, at: float) -> None:
        """The vertex's rate limit held back a micro-batch at ``at`` (tidal.spark.batch.admission)."""
        self.set_meta(f"throttled:{vertex}", repr(at))

    def throttled_at(self, vertex: str) -> float | None:
        """When the vertex's rate limit last held back a micro-batch (None: never)."""
        value = self.meta(f"throttled:{vertex}")
        return None if value is None else float(value)

    @contextmanager
    def claiming(self) -> Iterator[RoomClaims]:
        """The buffers' claims in a write transaction: one admission at a time, across the
        processes the readers run in, reads the room the others claimed and claims its own."""
        with self._store.transaction() as db:
            yield RoomClaims(db)

    def set_meta(self, key: str, value: str) -> None:
        with self._store.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def meta(self, key: str) -> str | None:
        row = self._store.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def processed(self, vertex: str) -> int:
        """Messages the vertex has processed so far (the sum over its committed batches)."""
        return self.progress(vertex)[0]

    def read_counts(self, vertex: str, replicas: int) -> dict[str, float]:
        """``getPodReadCounts``: messages read so far by each of the vertex's ``replicas`` running
        replicas, by name (``vertex-0``, ``vertex-1``, …); a replica that read nothing yet is
        absent, and one past ``replicas`` is gone (its count stays for when it comes back)."""
        rows = self._store.db.execute(
            "SELECT replica, count FROM replica_reads WHERE vertex=? AND replica < ? ORDER BY replica",
            (vertex, replicas),
        )
        return {f"{vertex}-{int(replica)}": float(count) for replica, count in rows}

    def progress(self, vertex: str) -> tuple[int, float]:
        """Messages processed and busy seconds so far, summed over the committed batches."""
        row = self._store.db.execute(
            "SELECT coalesce(sum(rows), 0), coalesce(sum(busy), 0) FROM batches WHERE vertex=?", (vertex,)
        ).fetchone()
        return int(row[0]), float(row[1])

    def ready_replicas(self, vertex: str, replicas: int) -> int:
        """The replicas Spark really ran, as far as the committed batches show: ``replicas`` once
        a batch admitted after the count was last set ran that many tasks (or had fewer messages
        than replicas, so could not use more); until then the tasks of the vertex's latest batch
        that read messages (a scale-up is not ready before it ran), at most ``replicas``. Before
        any such batch nothing was observed, and ``replicas`` is taken as ready."""
        db = self._store.db
        row = db.execute(
            "SELECT tasks, rows, at FROM batches WHERE vertex=? AND rows > 0 ORDER BY batch_id DESC LIMIT 1",
            (vertex,),
        ).fetchone()
        if row is None:
            return replicas
        tasks, rows, at = int(row[0]), int(row[1]), float(row[2])
        changed = db.execute("SELECT updated FROM control WHERE vertex=?", (vertex,)).fetchone()
        if changed is not None and at >= float(changed[0]) and (tasks >= replicas or rows < replicas):
            return replicas
        return min(replicas, tasks)

    def expansion(self, vertex: str, last: int = 5) -> float:
        """Messages written per message read over the vertex's ``last`` committed batches that
        read any, at least 1 (a filter's room is not stretched): how far an output may grow
        per input message admitted."""
        row = self._store.db.execute(
            "SELECT max(CAST(written AS REAL) / rows) FROM (SELECT rows, written FROM batches "
            "WHERE vertex=? AND rows > 0 ORDER BY batch_id DESC LIMIT ?)",
            (vertex, last),
        ).fetchone()
        return max(1.0, float(row[0])) if row and row[0] is not None else 1.0

    def known(self, vertex: str) -> bool:
        """Has a replica count ever been set for ``vertex``?"""
        return (
            self._store.db.execute("SELECT 1 FROM control WHERE vertex=?", (vertex,)).fetchone() is not None
        )

    def batches(self, vertex: str) -> list[BatchRecord]:
        rows = self._store.db.execute(
            "SELECT vertex, batch_id, tasks, rows, at, written, busy FROM batches WHERE vertex=? "
            "ORDER BY batch_id",
            (vertex,),
        )
        return [
            BatchRecord(v, int(b), int(t), int(r), float(a), int(w), float(u)) for v, b, t, r, a, w, u in rows
        ]

    def close(self) -> None:
        self._store.close()
