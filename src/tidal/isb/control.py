"""The control record: desired replicas per vertex, and what each micro-batch did.

It lives in the pipeline's SQLite database because the readers that consult it run in Python
processes the JVM starts (not in the driver's), so state is shared through the file, not through
Python objects (``shared/design.md``). The controller writes ``replicas``; the Spark reader of a
vertex reads it at every micro-batch; the sink records each committed batch here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from tidal.isb.sqlite import SqliteStore

__all__ = ["BatchRecord", "ControlStore"]


@dataclass(frozen=True, slots=True)
class BatchRecord:
    vertex: str
    batch_id: int
    tasks: int
    rows: int
    at: float


class ControlStore:
    def __init__(self, path: str | Path) -> None:
        self._store = SqliteStore(path)
        with self._store.transaction() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS control (vertex TEXT PRIMARY KEY, replicas INTEGER NOT NULL, "
                "updated REAL NOT NULL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS batches (vertex TEXT NOT NULL, batch_id INTEGER NOT NULL, "
                "tasks INTEGER NOT NULL, rows INTEGER NOT NULL, at REAL NOT NULL, "
                "PRIMARY KEY (vertex, batch_id))"
            )

    def set_replicas(self, vertex: str, replicas: int) -> None:
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0, got {replicas}")
        with self._store.transaction() as db:
            db.execute(
                "INSERT INTO control VALUES (?, ?, ?) ON CONFLICT(vertex) DO UPDATE SET "
                "replicas=excluded.replicas, updated=excluded.updated",
                (vertex, replicas, time.time()),
            )

    def replicas(self, vertex: str, default: int = 1) -> int:
        row = self._store.db.execute("SELECT replicas FROM control WHERE vertex=?", (vertex,)).fetchone()
        return int(row[0]) if row else default

    def record_batch(self, vertex: str, batch_id: int, tasks: int, rows: int) -> None:
        with self._store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, ?)",
                (vertex, batch_id, tasks, rows, time.time()),
            )

    def processed(self, vertex: str) -> int:
        """Messages the vertex has processed so far (the sum over its committed batches)."""
        row = self._store.db.execute(
            "SELECT coalesce(sum(rows), 0) FROM batches WHERE vertex=?", (vertex,)
        ).fetchone()
        return int(row[0])

    def known(self, vertex: str) -> bool:
        """Has a replica count ever been set for ``vertex``?"""
        return (
            self._store.db.execute("SELECT 1 FROM control WHERE vertex=?", (vertex,)).fetchone() is not None
        )

    def batches(self, vertex: str) -> list[BatchRecord]:
        rows = self._store.db.execute(
            "SELECT vertex, batch_id, tasks, rows, at FROM batches WHERE vertex=? ORDER BY batch_id",
            (vertex,),
        )
        return [BatchRecord(v, int(b), int(t), int(r), float(a)) for v, b, t, r, a in rows]

    def close(self) -> None:
        self._store.close()
