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
- ``batches`` and ``replica_reads``: what each committed micro-batch did, in the batch ledger
  (:mod:`tidal.isb.batch_ledger`, this class's base): tasks, messages in and out, busy seconds,
  delivery delays, drops, the replicas' read counts.
- ``reports``: what a source's reader saw of its source (its ``pending()``, or why it is not
  available), for the controller in the driver process.
- ``meta``: small facts of the run that must survive a restart (the generator's start time, a
  Kafka source's last micro-batch and its split into tasks), and the task slots each vertex has
  on a cluster manager (:meth:`ControlStore.set_slots`), which cap what admission takes.
- ``claims``: the room in a buffer that several vertices write (a join's input) each writer's
  admitted micro-batch may fill (:meth:`ControlStore.claiming`, :mod:`tidal.spark.batch.admission`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tidal.isb.batch_ledger import BatchLedger
from tidal.isb.durability import DEFAULT, Durability
from tidal.isb.sqlite import SqliteStore

__all__ = ["STALE_REPORT_SECONDS", "BatchRange", "ControlStore", "RoomClaims", "SourceReport"]

SLOTS_KEY = "executors:slots"  # the meta record of set_slots

STALE_REPORT_SECONDS = 30.0  # a source's report older than this says nothing about now


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
    """A source's ``pending()`` as its reader last saw it; ``pending`` None = not available.

    ``processed``: the vertex's processed count (its committed micro-batches) when the report
    was made, None in a report written before it was kept. A reader reports at the start of a
    micro-batch, and the batch's messages count as processed when it commits, so the report and
    the count are only a snapshot together: :meth:`pending_now` takes off what was processed
    since (:mod:`tidal.controller.probe`)."""

    pending: float | None
    error: str
    at: float
    processed: float | None = None

    def pending_now(self, processed: float) -> float | None:
        """What is pending now that ``processed`` messages are: the report, less what was
        processed since it was made. Read as is, a batch that committed after the report counts
        both as processed and as pending until the next report, which a query stopped for a
        replica change does not make for seconds: up to a micro-batch (500) too many, read over
        a one-second window. On the cluster's step, with 900/s arriving at the source, `enrich`
        read 1,058/s and went 3 → 6, then back down to 4 and 3 (2026-11-28)."""
        if self.pending is None or self.processed is None:
            return self.pending
        return max(0.0, self.pending - max(0.0, processed - self.processed))

    def current(
        self, processed: float, now: float, stale_after: float = STALE_REPORT_SECONDS
    ) -> float | None:
        """:meth:`pending_now`, or None (not available) once the report is older than
        ``stale_after`` seconds at ``now``: its reader stopped reporting (a query that is down,
        a micro-batch that hangs). The live status reads it so; the controller's probe applies the same
        rule with its own ``stale_after`` (:mod:`tidal.controller.probe`)."""
        return None if self.stale(now, stale_after) else self.pending_now(processed)

    def stale(self, now: float, stale_after: float = STALE_REPORT_SECONDS) -> bool:
        """Older than ``stale_after`` seconds at ``now``: it says nothing about now."""
        return now - self.at > stale_after


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


class ControlStore(BatchLedger):
    """The control record of a run (this module's docstring), with its batch ledger."""

    def __init__(self, path: str | Path, durability: Durability = DEFAULT) -> None:
        # The plans must outlive a power cut as the buffers do (a replay reuses its split, and
        # so its de-duplication keys): one file, one WAL, one setting.
        self._store = SqliteStore(path, durability=durability)
        with self._store.transaction() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS control (vertex TEXT PRIMARY KEY, replicas INTEGER NOT NULL, "
                "updated REAL NOT NULL)"
            )
            self._create_ledger(db)
            db.execute(
                "CREATE TABLE IF NOT EXISTS plans (vertex TEXT PRIMARY KEY, first INTEGER NOT NULL, "
                "last INTEGER NOT NULL, parts TEXT NOT NULL DEFAULT '[]')"
            )
            if "parts" not in {row[1] for row in db.execute("PRAGMA table_info(plans)")}:
                db.execute("ALTER TABLE plans ADD COLUMN parts TEXT NOT NULL DEFAULT '[]'")  # an older run
            db.execute(
                "CREATE TABLE IF NOT EXISTS reports (vertex TEXT PRIMARY KEY, pending REAL, "
                "error TEXT NOT NULL, at REAL NOT NULL, processed REAL)"
            )
            if "processed" not in {row[1] for row in db.execute("PRAGMA table_info(reports)")}:
                db.execute("ALTER TABLE reports ADD COLUMN processed REAL")  # an older run
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

    def replicas_version(self, vertex: str) -> int:
        """The version of the vertex's replicas (0: never set)."""
        row = self._store.db.execute("SELECT version FROM control WHERE vertex=?", (vertex,)).fetchone()
        return int(row[0]) if row else 0

    def replicas(self, vertex: str, default: int = 1) -> int:
        row = self._store.db.execute("SELECT replicas FROM control WHERE vertex=?", (vertex,)).fetchone()
        return int(row[0]) if row else default

    def set_slots(self, slots: Mapping[str, int]) -> None:
        """The task slots each vertex's replicas have now on a cluster manager: the registered
        executors' cores shared among the vertices (the executor allocator writes them as they
        change, :func:`~tidal.scaling.executors.ready_slots`). Admission takes no more replicas
        than these into a micro-batch (:mod:`tidal.spark.batch.admission`). Empty: no cap (local
        mode, or no look at the executors yet this run)."""
        self.set_meta(SLOTS_KEY, json.dumps(dict(sorted(slots.items()))) if slots else "")

    def slots(self, vertex: str) -> int | None:
        """The task slots the vertex has now (:meth:`set_slots`); None: no cap known."""
        value = self.meta(SLOTS_KEY)
        found = json.loads(value).get(vertex) if value else None
        return None if found is None else int(found)

    def set_closing(self, vertex: str, closing: bool) -> None:
        """Mark a source as closing: its reader admits nothing more, so the batch in flight is
        the last and a stop that follows lands between two batches (a stop mid-batch leaves what
        the tasks wrote downstream uncounted by the source until the replay)."""
        self.set_meta(f"closing:{vertex}", "1" if closing else "")

    def closing(self, vertex: str) -> bool:
        return bool(self.meta(f"closing:{vertex}"))

    def set_holding(self, vertex: str, holding: bool) -> None:
        """Hold any vertex's reader: it admits nothing more, so its query reaches a gap between
        batches (a reduce whose state is being moved: Spark repartitions only after a finished
        batch, and a backlog read back to back never leaves a gap). Unlike ``closing``, which
        only a source honours, so a pause drains the rest of the pipeline."""
        self.set_meta(f"holding:{vertex}", "1" if holding else "")

    def holding(self, vertex: str) -> bool:
        return bool(self.meta(f"holding:{vertex}"))

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
        """Record what the source's reader saw, with the vertex's processed count in the same
        transaction (see :class:`SourceReport`)."""
        with self._store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO reports (vertex, pending, error, at, processed) VALUES "
                "(?, ?, ?, ?, coalesce((SELECT rows FROM batch_totals WHERE vertex=?), 0))",
                (vertex, pending, error, time.time(), vertex),
            )

    def source_report(self, vertex: str) -> SourceReport | None:
        row = self._store.db.execute(
            "SELECT pending, error, at, processed FROM reports WHERE vertex=?", (vertex,)
        ).fetchone()
        if row is None:
            return None
        pending = None if row[0] is None else float(row[0])
        return SourceReport(pending, str(row[1]), float(row[2]), None if row[3] is None else float(row[3]))

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

    def known(self, vertex: str) -> bool:
        """Has a replica count ever been set for ``vertex``?"""
        return (
            self._store.db.execute("SELECT 1 FROM control WHERE vertex=?", (vertex,)).fetchone() is not None
        )

    def close(self) -> None:
        self._store.close()
