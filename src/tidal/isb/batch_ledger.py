"""What each committed micro-batch did: the batch ledger of the control record.

One row per committed micro-batch of a vertex (``batches``): its tasks (the replicas that really
ran), messages in and out, the seconds its tasks spent working (``busy``), what they used
(``peak_rss``, ``cpu``), its dead letters, drops by reason and a routed sink's retries and, for a
sink, the delivery delays of its messages (``delays``: a :class:`~tidal.scaling.latency.DelaySample`).
Beside it, ``replica_reads``: messages each replica (read partition ``i`` of a batch) has read so
far, kept in the same transaction as the batch (a replay replaces its own counts): Numaflow's
per-pod read counts (``getPodReadCounts``), which its rater reads per pod for a MonoVertex.

**Running totals** (``batch_totals``): what the probe, a source's report, the status and the
drop counters sum over a vertex's batches, kept per vertex in the transaction that records each
batch (a replay takes its first recording back). Summed over ``batches`` instead, every probe
tick and every trigger of a source read the whole run: 15 ms a sum for a day's batches at one a
second, inside the reader's write transaction. For the same reason the batches are indexed by
commit time (``batches_at``), which the live status's window of delays reads.

**Why a module of its own.** The control record (:mod:`tidal.isb.control`) is where the
controller's replica counts, the readers' plans and the run's small facts meet; the ledger is the
one home of the batches' accounting, which the status, the rater, the vertical recommender and the
reports read. It shares the control record's SQLite file (one WAL, one durability setting), so
:class:`~tidal.isb.control.ControlStore` takes it in as a base class rather than a second store.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from tidal.isb.sqlite import SqliteStore
from tidal.scaling.latency import DelaySample

__all__ = ["BatchLedger", "BatchRecord", "MemberBatch", "Progress"]


class Progress(NamedTuple):
    """A vertex's committed batches so far, summed: what the controller's probe samples."""

    processed: int  # messages
    busy: float  # seconds its tasks spent working
    tasks: int  # tasks run (one per replica and micro-batch): the fixed part of busy time


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


# The columns of a batch that are summed per vertex, in ``batch_totals``' order.
_TOTALLED = ("rows", "busy", "tasks", "dead", "dropped", "dropped_full", "dropped_exhausted", "retried")
_SUMS = ", ".join(f"coalesce(sum({c}), 0)" for c in _TOTALLED)


def _delay_text(delays: DelaySample | None) -> str | None:
    if delays is None or not delays.count:
        return None
    return json.dumps({"n": delays.count, "p": [round(p, 4) for p in delays.points]})


class BatchLedger:
    """The batch accounting of a :class:`~tidal.isb.control.ControlStore` (its base class)."""

    _store: SqliteStore

    @staticmethod
    def _create_ledger(db: sqlite3.Connection) -> None:
        """The ledger's tables, and the columns an older run's file lacks."""
        db.execute(
            "CREATE TABLE IF NOT EXISTS batches (vertex TEXT NOT NULL, batch_id INTEGER NOT NULL, "
            "tasks INTEGER NOT NULL, rows INTEGER NOT NULL, at REAL NOT NULL, "
            "written INTEGER NOT NULL DEFAULT 0, busy REAL NOT NULL DEFAULT 0, "
            "dead INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (vertex, batch_id))"
        )
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
        if "dropped_full" not in columns:  # the drops' reasons (drops)
            db.execute("ALTER TABLE batches ADD COLUMN dropped_full INTEGER NOT NULL DEFAULT 0")
            db.execute("ALTER TABLE batches ADD COLUMN dropped_exhausted INTEGER NOT NULL DEFAULT 0")
        # The live status reads a sink's delays of the last minute every refresh: without it, a
        # scan of the vertex's whole run (19 ms at a day of batches, 0.04 ms with it).
        db.execute("CREATE INDEX IF NOT EXISTS batches_at ON batches (vertex, at)")
        exists = "SELECT 1 FROM sqlite_master WHERE type='table' AND name='batch_totals'"
        if not db.execute(exists).fetchone():
            db.execute(
                "CREATE TABLE batch_totals (vertex TEXT PRIMARY KEY, rows INTEGER NOT NULL, "
                "busy REAL NOT NULL, tasks INTEGER NOT NULL, dead INTEGER NOT NULL, "
                "dropped INTEGER NOT NULL, dropped_full INTEGER NOT NULL, "
                "dropped_exhausted INTEGER NOT NULL, retried INTEGER NOT NULL)"
            )
            db.execute(  # an older run's batches: summed once, here
                f"INSERT INTO batch_totals SELECT vertex, {_SUMS} FROM batches GROUP BY vertex"
            )
        db.execute(  # what a source's client dropped before Tidal read it (record_source_drops)
            "CREATE TABLE IF NOT EXISTS source_drops (vertex TEXT PRIMARY KEY, count INTEGER NOT NULL)"
        )
        db.execute(
            "CREATE TABLE IF NOT EXISTS replica_reads (vertex TEXT NOT NULL, replica INTEGER NOT NULL, "
            "count INTEGER NOT NULL, PRIMARY KEY (vertex, replica))"
        )

    def busy_after(self, vertex: str, after: int) -> list[tuple[int, float]]:
        """``(batch_id, busy seconds)`` of ``vertex``'s committed batches past ``after`` that read
        messages, in order: the state-partition policy's measure of a reduce's stateful stage."""
        rows = self._store.db.execute(
            "SELECT batch_id, busy FROM batches WHERE vertex=? AND batch_id>? AND rows > 0 ORDER BY batch_id",
            (vertex, after),
        ).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

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
            old = self._recorded(db, vertex, batch_id, "parts")
            head = (rows, busy, tasks, dead, dropped, full, exhausted, retried)
            self._add_to_totals(db, vertex, head, None if old is None else old[1:])
            for m in members:
                member = (m.rows, m.busy, tasks, m.dead, m.dropped, m.full, m.exhausted, 0)
                self._add_to_totals(db, m.vertex, member, self._recorded(db, m.vertex, batch_id))
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

    @staticmethod
    def _recorded(db: sqlite3.Connection, vertex: str, batch_id: int, *first: str) -> tuple[Any, ...] | None:
        """The batch's recording so far (a replay's first), if any: the columns ``first``, then
        the totalled ones; read before the row is replaced."""
        columns = ", ".join((*first, *_TOTALLED))
        row = db.execute(
            f"SELECT {columns} FROM batches WHERE vertex=? AND batch_id=?", (vertex, batch_id)
        ).fetchone()
        return None if row is None else tuple(row)

    @staticmethod
    def _add_to_totals(
        db: sqlite3.Connection, vertex: str, new: Sequence[float], old: Sequence[float] | None
    ) -> None:
        """Add a batch about to be recorded to its vertex's totals, less ``old``, its first
        recording, if this is a replay."""
        delta = [n - (old[i] if old is not None else 0) for i, n in enumerate(new)]
        updates = ", ".join(f"{c} = {c} + excluded.{c}" for c in _TOTALLED)
        db.execute(
            f"INSERT INTO batch_totals (vertex, {', '.join(_TOTALLED)}) "
            f"VALUES (?, {', '.join('?' * len(_TOTALLED))}) ON CONFLICT(vertex) DO UPDATE SET {updates}",
            (vertex, *delta),
        )

    def totals(self, vertex: str) -> dict[str, float]:
        """The vertex's committed batches summed (``batch_totals``): each of :data:`_TOTALLED`."""
        row = self._store.db.execute(
            f"SELECT {', '.join(_TOTALLED)} FROM batch_totals WHERE vertex=?", (vertex,)
        ).fetchone()
        return dict(zip(_TOTALLED, row if row is not None else (0,) * len(_TOTALLED), strict=True))

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
        return int(self.totals(vertex)["dead"])

    def dropped(self, vertex: str) -> int:
        """Messages the vertex dropped (tagged DROP, taken by no output edge, at a full buffer,
        after its sink's retries, or by its source's client), over the run."""
        return sum(self.drops(vertex).values())

    def record_source_drops(self, vertex: str, count: int) -> None:
        """``count`` more messages the source ``vertex``'s client dropped before Tidal read them
        (a core NATS subscription past its limit: Numaflow's "slow consumer")."""
        if count <= 0:
            return
        with self._store.transaction() as db:
            db.execute(
                "INSERT INTO source_drops (vertex, count) VALUES (?, ?) "
                "ON CONFLICT(vertex) DO UPDATE SET count = count + excluded.count",
                (vertex, count),
            )

    def drops(self, vertex: str) -> dict[str, int]:
        """The vertex's drops by reason, as Numaflow's ``forwarder_drop_total`` labels them:
        ``tags`` (tagged DROP, or no output edge's conditions matched), ``buffer-full`` (an
        ``onFull: discardLatest`` edge), ``sink-retries-exhausted`` (``onFailure: drop``), and
        ``source-overflow`` (the source's client held its limit already). Only the reasons with
        drops."""
        totals = self.totals(vertex)
        total, full, exhausted = (int(totals[c]) for c in ("dropped", "dropped_full", "dropped_exhausted"))
        source = self._store.db.execute("SELECT count FROM source_drops WHERE vertex=?", (vertex,)).fetchone()
        out = {
            "tags": total - full - exhausted,
            "buffer-full": full,
            "sink-retries-exhausted": exhausted,
            "source-overflow": int(source[0]) if source else 0,
        }
        return {reason: n for reason, n in out.items() if n}

    def sink_retried(self, vertex: str) -> int:
        """Message writes its routed sink retried, over its committed batches (a chain's are its
        head's: the replicas that wrote them)."""
        return int(self.totals(vertex)["retried"])

    def processed(self, vertex: str) -> int:
        """Messages the vertex has processed so far (the sum over its committed batches)."""
        return self.progress(vertex).processed

    def read_counts(self, vertex: str, replicas: int) -> dict[str, float]:
        """``getPodReadCounts``: messages read so far by each of the vertex's ``replicas`` running
        replicas, by name (``vertex-0``, ``vertex-1``, …); a replica that read nothing yet is
        absent, and one past ``replicas`` is gone (its count stays for when it comes back)."""
        rows = self._store.db.execute(
            "SELECT replica, count FROM replica_reads WHERE vertex=? AND replica < ? ORDER BY replica",
            (vertex, replicas),
        )
        return {f"{vertex}-{int(replica)}": float(count) for replica, count in rows}

    def progress(self, vertex: str) -> Progress:
        """Messages processed, busy seconds and tasks so far, summed over the committed batches."""
        totals = self.totals(vertex)
        return Progress(int(totals["rows"]), float(totals["busy"]), int(totals["tasks"]))

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

    def batches(self, vertex: str) -> list[BatchRecord]:
        rows = self._store.db.execute(
            "SELECT vertex, batch_id, tasks, rows, at, written, busy FROM batches WHERE vertex=? "
            "ORDER BY batch_id",
            (vertex,),
        )
        return [
            BatchRecord(v, int(b), int(t), int(r), float(a), int(w), float(u)) for v, b, t, r, a, w, u in rows
        ]
