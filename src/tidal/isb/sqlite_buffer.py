"""One buffer of the SQLite backend: append, read, commit (:class:`SqliteBuffer`).

The layout, the crash safety of an append and a commit, durability and de-duplication are
described in :mod:`tidal.isb.sqlite`, whose :class:`~tidal.isb.sqlite.SqliteStore` holds the
connection and the buffers' table; this module holds what one buffer does with them.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from tidal import errors
from tidal.isb import segments
from tidal.isb.base import AppendResult, BufferLimits, BufferStats, Message, check_batch
from tidal.isb.durability import Durability
from tidal.isb.segment_files import SegmentFiles

__all__ = ["KEEP_KEYS", "SqliteBuffer"]

_CHUNK = 500  # ids per IN (...) query
KEEP_KEYS = 10_000  # de-duplication keys kept past the window: more than a batch in flight holds
_READ_ATTEMPTS = 3  # a segment trimmed between a read's snapshot and its file read: read again


class Store(Protocol):
    """What a buffer uses of its :class:`~tidal.isb.sqlite.SqliteStore` (the store imports the
    buffer, so the buffer names it by what it does)."""

    segments_dir: Path
    durability: Durability
    dedup_window: float

    @property
    def db(self) -> sqlite3.Connection: ...

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def snapshot(self) -> AbstractContextManager[sqlite3.Connection]: ...


class SqliteBuffer:
    """One buffer in a :class:`SqliteStore`."""

    def __init__(self, store: Store, name: str, limits: BufferLimits) -> None:
        self._store = store
        self._name = name
        self._limits = limits
        self._table = f'"buf_{name}"'
        self._ids = f'"ids_{name}"'
        self._files = SegmentFiles(store.segments_dir / name, name, store.durability)

    @property
    def name(self) -> str:
        return self._name

    @property
    def limits(self) -> BufferLimits:
        return self._limits

    def _last_seq(self, db: sqlite3.Connection) -> int:
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name=?", (f"buf_{self._name}",)).fetchone()
        return int(row[0]) if row else 0

    def _committed(self, db: sqlite3.Connection) -> int:
        row = db.execute("SELECT committed FROM isb_buffers WHERE name=?", (self._name,)).fetchone()
        if row is None:
            raise errors.BufferNotFound(self._name)
        return int(row[0])

    def _run(self, append: Any) -> AppendResult:
        try:
            with self._store.transaction() as db:
                return append(db)  # type: ignore[no-any-return]
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise errors.BufferNotFound(self._name) from exc
            raise

    def _store_segment(
        self, db: sqlite3.Connection, batch: Any, duplicates: int, staged: tuple[Path, int] | None = None
    ) -> AppendResult:
        """Check the room and store ``batch`` (SEGMENT_SCHEMA), its file written (or ``staged``)
        and renamed to its sequence, its row inserted in ``db``'s transaction."""
        n = batch.num_rows
        last = self._last_seq(db)
        length = last - self._committed(db)  # every stored, uncommitted message
        if length + n > self._limits.max_length:
            raise errors.BufferFull(self._name, length, n, self._limits.max_length)
        tmp, size = staged or self._files.stage(batch)
        self._files.place(tmp, last + n)
        db.execute(
            f"INSERT INTO {self._table} (seq, first, size) VALUES (?, ?, ?)", (last + n, last + 1, size)
        )
        return AppendResult(last + 1, last + n, n, duplicates)

    # -- append ----------------------------------------------------------------------------------

    def append_batch(
        self, key: str, ids: Any, payloads: Any, times: Any = None, keys: Any = None
    ) -> AppendResult:
        if not isinstance(key, str) or not key:
            raise TypeError(f"append_batch: the key must be a non-empty str, got {key!r}")
        batch = segments.as_segment(ids, payloads, times, keys)
        if batch.num_rows == 0:
            return AppendResult(0, 0, 0, 0)
        # The file is written before the transaction, so the write lock is held for a rename
        # and two small inserts only (the vertex's other replicas append to the same buffer).
        staged = self._files.stage(batch)

        def append(db: sqlite3.Connection) -> AppendResult:
            before = db.total_changes
            db.execute(f"INSERT OR IGNORE INTO {self._ids} (id, at) VALUES (?, ?)", (key, time.time()))
            if db.total_changes == before:
                return AppendResult(0, 0, 0, batch.num_rows)  # this key was appended already
            return self._store_segment(db, batch, 0, staged)

        try:
            return self._run(append)
        finally:
            staged[0].unlink(missing_ok=True)  # still there when the batch was refused or known

    def append(
        self,
        payloads: Sequence[bytes],
        ids: Sequence[str],
        times: Sequence[float] | None = None,
        keys: Sequence[Sequence[str] | None] | None = None,
    ) -> AppendResult:
        check_batch(payloads, ids)
        if not ids:
            return AppendResult(0, 0, 0, 0)
        if keys is not None and len(keys) != len(ids):  # before any id is claimed
            raise TypeError(f"append: {len(keys)} keys but {len(ids)} ids (one list per message)")
        return self._run(lambda db: self._append(db, payloads, ids, times, keys))

    def _append(
        self,
        db: sqlite3.Connection,
        payloads: Sequence[bytes],
        ids: Sequence[str],
        times: Sequence[float] | None = None,
        keys: Sequence[Sequence[str] | None] | None = None,
    ) -> AppendResult:
        n = len(ids)
        # Optimistic path: claim every id at once. When all are new (the normal case: a replay
        # is rare) nothing else is needed; a per-id lookup first cost a third of the append.
        db.execute("SAVEPOINT claim")
        before = db.total_changes
        now = time.time()
        db.executemany(f"INSERT OR IGNORE INTO {self._ids} (id, at) VALUES (?, ?)", [(i, now) for i in ids])
        # An id repeated within the batch is ignored by the second insert too, so a full count
        # also proves the batch holds no repeats.
        if db.total_changes - before == n:
            db.execute("RELEASE claim")
            return self._store_segment(db, segments.as_segment(ids, payloads, times, keys), 0)
        db.execute("ROLLBACK TO claim")
        db.execute("RELEASE claim")
        return self._append_with_duplicates(db, payloads, ids, now, times, keys)

    def _append_with_duplicates(
        self,
        db: sqlite3.Connection,
        payloads: Sequence[bytes],
        ids: Sequence[str],
        now: float,
        times: Sequence[float] | None = None,
        keys: Sequence[Sequence[str] | None] | None = None,
    ) -> AppendResult:
        """A batch with known ids (a replay) or repeated ids: store each new id once, in order,
        with its own time and keys."""
        seen: set[str] = set()
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            seen.update(r[0] for r in db.execute(f"SELECT id FROM {self._ids} WHERE id IN ({marks})", chunk))
        batch = segments.as_segment(ids, payloads, times if times is not None else [now] * len(ids), keys)
        new = segments.first_unseen(batch, seen)
        duplicates = len(ids) - new.num_rows
        if not new.num_rows:
            return AppendResult(0, 0, 0, duplicates)
        result = self._store_segment(db, new, duplicates)
        db.executemany(
            f"INSERT OR REPLACE INTO {self._ids} (id, at) VALUES (?, ?)",
            [(i, now) for i in new.column("id").to_pylist()],
        )
        return result

    # -- read ------------------------------------------------------------------------------------

    def _segments(self, db: sqlite3.Connection, first: int, last: int) -> Any:
        """Messages ``first..last`` as one Arrow batch, cut out of the segments that hold them."""
        parts = []
        if last >= first:
            rows = db.execute(
                f"SELECT seq, first, size FROM {self._table} WHERE seq >= ? ORDER BY seq", (first,)
            )
            for seg_last, seg_first, size in rows:
                if seg_first > last:
                    break
                batch = segments.decode(self._files.load(seg_last, size))
                lo, hi = max(first, seg_first), min(last, seg_last)
                parts.append(segments.with_seqs(batch.slice(lo - seg_first, hi - lo + 1), lo))
        return segments.join(parts)

    def _read(self, first: int, last: int, *, limit: int | None = None) -> Any:
        """``first..last`` (or ``limit`` messages from ``first``), clamped to what is uncommitted."""
        for attempt in range(_READ_ATTEMPTS):
            with self._store.snapshot() as db:  # the commit point and the segments agree
                start = max(first, self._committed(db) + 1)
                end = last if limit is None else start + limit - 1
                try:
                    return self._segments(db, start, end)
                except FileNotFoundError:
                    # A commit after this snapshot trimmed the segment: read again past it.
                    if attempt == _READ_ATTEMPTS - 1:
                        raise
        raise AssertionError("unreachable")

    def read_batch(self, first: int, last: int) -> Any:
        return self._read(first, last)

    def read(self, after: int, limit: int) -> list[Message]:
        if limit <= 0:
            return []
        # Committed messages are gone: read past them.
        return segments.messages(self._read(after + 1, 0, limit=limit))

    def read_range(self, first: int, last: int) -> list[Message]:
        return segments.messages(self.read_batch(first, last))

    # -- commit and state ------------------------------------------------------------------------

    def commit(self, seq: int) -> None:
        with self._store.transaction() as db:
            committed = self._committed(db)
            if seq <= committed:
                return
            seq = min(seq, self._last_seq(db))
            db.execute("UPDATE isb_buffers SET committed=? WHERE name=?", (seq, self._name))
            db.execute(f"DELETE FROM {self._table} WHERE seq <= ?", (seq,))
            # Never the newest KEEP_KEYS: a batch whose commit entry a crash lost is replayed at
            # the next start, however late, and its keys are then the newest (:mod:`tidal.isb.sqlite`).
            db.execute(
                f"DELETE FROM {self._ids} WHERE at < ? AND id NOT IN "
                f"(SELECT id FROM {self._ids} ORDER BY at DESC LIMIT {KEEP_KEYS})",
                (time.time() - self._store.dedup_window,),
            )
        self._files.sweep(seq)

    def committed(self) -> int:
        return self._committed(self._store.db)

    def last_seq(self) -> int:
        return self._last_seq(self._store.db)

    def verify(self) -> None:
        with self._store.snapshot() as db:
            self._files.verify(db.execute(f"SELECT seq, size FROM {self._table}").fetchall())

    def stats(self) -> BufferStats:
        with self._store.snapshot() as db:
            last, committed = self._last_seq(db), self._committed(db)
            return BufferStats(self._name, last, committed, last - committed, self._limits)

    def pending(self) -> int:
        return self.stats().pending

    def close(self) -> None:
        """Buffers share the store's connection; closing the store closes it."""
