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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tidal import errors
from tidal.isb.base import (
    DEFAULT_DEDUP_WINDOW_SECONDS,
    BufferLimits,
)
from tidal.isb.durability import DEFAULT, Durability, sync_dir
from tidal.isb.sqlite_buffer import SqliteBuffer

__all__ = ["SqliteBuffer", "SqliteStore"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_BUSY_TIMEOUT_S = 30.0
# The index rows are small now that the data lives in files; these were measured when segments
# were SQLite blobs (16 KiB pages and a checkpoint every 64 MB against 4 KiB / 4 MB: 0.16 against
# 0.8 µs a message) and are kept: they cost nothing for small rows.
PAGE_SIZE = 16384
WAL_CHECKPOINT_PAGES = 4000


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
