"""The default buffer backend: SQLite in WAL mode for the index, segment files for the data.

Each buffer is a table ``buf_<name>`` with **one row per appended batch** (a segment,
:mod:`tidal.isb.segments`): ``seq INTEGER PRIMARY KEY AUTOINCREMENT`` is the batch's last
sequence, ``first`` its first, ``size`` the bytes of its file. The ids and payloads are an Arrow
IPC file ``<db>-segments/<name>/<seq>``, next to SQLite's own ``-wal`` and ``-shm`` files.

**Why files.** A row per message cost a B-tree insert per message, half of an append. Storing
each segment as a blob in SQLite cost the bytes twice on the way in (the WAL, then the
checkpoint) and once more on the way out: deleting a blob walks its overflow pages, so trimming
read back everything it freed. Side by side per message through append, read and trim:
SQLite blobs 1.0–1.2 µs, files 0.15–0.2 µs (``docs/benchmarks.md``).

AUTOINCREMENT matters: without it SQLite reuses sequences after the table is trimmed to empty,
which breaks replay by sequence.

**Crash safety.** An append writes its file under a temporary name first, then, inside one
``BEGIN IMMEDIATE`` transaction that also checks the length and claims the de-duplication key,
renames it to its sequence and inserts the row. A writer killed before the commit leaves at
most a file no row points to, which the next append of the same sequences replaces, so a batch
is stored whole or not at all. A commit deletes the rows of the segments it covers whole in one
transaction and then their files; one it covers in part stays until a later commit covers it,
and reads never return what was committed.

**Durability** (``buffers.durability``, :mod:`tidal.isb.durability`). Under ``sync`` (the
default) an append returns once its batch is on the disk: the segment file synced before the
write lock, its rename synced with its folder, the row committed with ``synchronous=FULL``, so
what was acknowledged upstream after it survives a power cut. Under ``os`` (``NORMAL``, files not
synced) a process crash loses nothing, a power loss may lose the last appends and commits (a
damaged segment is refused at the run's start, naming its file).

De-duplication keys (message ids for ``append``, batch keys for ``append_batch``) live in
``ids_<name>`` for ``dedup_window`` seconds, independent of trimming, so a replay after a crash
is de-duplicated even when the original was already committed; the newest ``KEEP_KEYS`` stay
past the window, so a replay after a long outage (the run restarted hours later) is too.

Many processes on one host may use the same file: each process opens its own connection (a
forked Spark Python worker never reuses its parent's). Measured facts (``shared/design.md``): a
single ``SELECT min(), max()`` scans the table, so the bounds are two sub-selects.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tidal import errors
from tidal.isb import segments
from tidal.isb.base import (
    DEFAULT_DEDUP_WINDOW_SECONDS,
    AppendResult,
    BufferLimits,
    BufferStats,
    Message,
    check_batch,
)
from tidal.isb.durability import DEFAULT, Durability, sync_dir
from tidal.isb.segment_files import SegmentFiles

__all__ = ["SqliteBuffer", "SqliteStore"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_CHUNK = 500  # ids per IN (...) query
_BUSY_TIMEOUT_S = 30.0
# The index rows are small now that the data lives in files; these were measured when segments
# were SQLite blobs (16 KiB pages and a checkpoint every 64 MB against 4 KiB / 4 MB: 0.16 against
# 0.8 µs a message) and are kept: they cost nothing for small rows.
PAGE_SIZE = 16384
WAL_CHECKPOINT_PAGES = 4000
KEEP_KEYS = 10_000  # de-duplication keys kept past the window: more than a batch in flight holds
_READ_ATTEMPTS = 3  # a segment trimmed between a read's snapshot and its file read: read again


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise errors.SpecError(
            "buffer",
            f"invalid buffer name {name!r}",
            "use letters, digits, '_', '-', '.', starting with a letter or digit",
        )
    return name


class SqliteStore:
    """The buffers of one pipeline, in one SQLite file."""

    def __init__(
        self,
        path: str | Path,
        dedup_window: float = DEFAULT_DEDUP_WINDOW_SECONDS,
        durability: Durability = DEFAULT,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.segments_dir = Path(f"{self.path}-segments")
        self.dedup_window = dedup_window
        self.durability = durability
        # One connection per thread (and per process: a forked child opens its own). A shared
        # connection breaks as soon as two threads use it: the runner's status and the
        # controller's probe would nest their transactions.
        self._local = threading.local()
        self._opened: list[tuple[int, sqlite3.Connection]] = []
        self._lock = threading.Lock()
        with self.transaction() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS isb_buffers (name TEXT PRIMARY KEY, max_length INTEGER NOT NULL,"
                " usage_limit REAL NOT NULL, committed INTEGER NOT NULL DEFAULT 0)"
            )
        if durability == "sync":  # the database's and its WAL's names (SQLite syncs their data)
            sync_dir(self.path.parent)

    # -- connection ----------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        """This thread's connection in this process."""
        local = self._local
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=_BUSY_TIMEOUT_S, check_same_thread=False
            )
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # takes effect only on a new file
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
            conn.execute(f"PRAGMA synchronous={'FULL' if self.durability == 'sync' else 'NORMAL'}")
            conn.execute(f"PRAGMA busy_timeout={int(_BUSY_TIMEOUT_S * 1000)}")
            local.conn, local.pid = conn, os.getpid()
            with self._lock:
                self._opened.append((local.pid, conn))
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: everything read inside sees one state of the file."""
        db = self.db
        db.execute("BEGIN")
        try:
            yield db
        finally:
            db.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this process opened (a forked child leaves its parent's)."""
        pid = os.getpid()
        with self._lock:
            for owner, conn in self._opened:
                if owner == pid:
                    conn.close()
            self._opened = []
        self._local = threading.local()

    # -- buffers -------------------------------------------------------------------------------

    def create(self, name: str, limits: BufferLimits | None = None) -> SqliteBuffer:
        _check_name(name)
        limits = limits or BufferLimits()
        with self.transaction() as db:
            db.execute(
                f'CREATE TABLE IF NOT EXISTS "buf_{name}" (seq INTEGER PRIMARY KEY AUTOINCREMENT,'
                " first INTEGER NOT NULL, size INTEGER NOT NULL)"
            )
            columns = {row[1] for row in db.execute(f'PRAGMA table_info("buf_{name}")')}
            if "size" not in columns:
                layout = "segments stored in SQLite" if "data" in columns else "a row per message"
                raise errors.BufferError(
                    f"buffer {name!r} in {self.path} has the format of an older Tidal ({layout}):"
                    " start the pipeline in a new run directory"
                )
            db.execute(
                f'CREATE TABLE IF NOT EXISTS "ids_{name}" '
                "(id TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID"
            )
            db.execute(f'CREATE INDEX IF NOT EXISTS "ids_{name}_at" ON "ids_{name}" (at)')
            db.execute(
                "INSERT INTO isb_buffers (name, max_length, usage_limit) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET "
                "max_length=excluded.max_length, usage_limit=excluded.usage_limit",
                (name, limits.max_length, limits.usage_limit),
            )
        folder = self.segments_dir / name
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            if self.durability == "sync":  # the new folders' names, before a segment goes in
                sync_dir(folder.parent)
                sync_dir(folder.parent.parent)
        return SqliteBuffer(self, name, limits)

    def open(self, name: str) -> SqliteBuffer:
        row = self.db.execute(
            "SELECT max_length, usage_limit FROM isb_buffers WHERE name=?", (name,)
        ).fetchone()
        if row is None:
            raise errors.BufferNotFound(name)
        return SqliteBuffer(self, name, BufferLimits(int(row[0]), float(row[1])))

    def list(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT name FROM isb_buffers ORDER BY name")]

    def drop(self, name: str) -> None:
        _check_name(name)
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM isb_buffers WHERE name=?", (name,)).fetchone() is None:
                raise errors.BufferNotFound(name)
            db.execute(f'DROP TABLE IF EXISTS "buf_{name}"')
            db.execute(f'DROP TABLE IF EXISTS "ids_{name}"')
            db.execute("DELETE FROM isb_buffers WHERE name=?", (name,))
            db.execute("DELETE FROM sqlite_sequence WHERE name=?", (f"buf_{name}",))
        shutil.rmtree(self.segments_dir / name, ignore_errors=True)


class SqliteBuffer:
    """One buffer in a :class:`SqliteStore`."""

    def __init__(self, store: SqliteStore, name: str, limits: BufferLimits) -> None:
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
            # the next start, however late, and its keys are then the newest (module docstring).
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
