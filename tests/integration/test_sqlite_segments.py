"""The SQLite backend's segment files: trimmed with their rows, left-overs of a dead writer
swept or replaced, damage reported, and a read that races a trim reads again.

Real files on a real SQLite database; the conformance suite covers the protocol itself.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from tidal import errors
from tidal.isb import BufferLimits
from tidal.isb.segment_files import SegmentFiles
from tidal.isb.sqlite import SqliteBuffer, SqliteStore


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(tmp_path / "pipeline.db")
    yield s
    s.close()


def files(store: SqliteStore, name: str) -> list[str]:
    return sorted(os.listdir(store.segments_dir / name))


def append(buffer: SqliteBuffer, key: str, n: int) -> None:
    buffer.append_batch(key, [f"{key}-{i}" for i in range(n)], [f"{key}:{i}".encode() for i in range(n)])


def test_one_file_per_segment_named_by_its_last_sequence_and_trimmed_with_it(store):
    buffer = store.create("b")
    for k, n in (("a", 10), ("b", 5), ("c", 7)):
        append(buffer, k, n)
    assert files(store, "b") == ["10", "15", "22"]
    buffer.commit(12)  # inside the second segment: it stays, its first messages unread
    assert files(store, "b") == ["15", "22"]
    assert [seq for seq, _, _ in buffer.read(0, 100)] == list(range(13, 23))
    buffer.commit(22)
    assert files(store, "b") == []
    store.drop("b")
    assert not (store.segments_dir / "b").exists()


def test_a_refused_or_known_batch_leaves_no_file(store):
    buffer = store.create("b", BufferLimits(max_length=10))
    append(buffer, "a", 8)
    with pytest.raises(errors.BufferFull):
        append(buffer, "b", 5)
    append(buffer, "a", 8)  # the same key again: de-duplicated
    assert files(store, "b") == ["8"]


def test_left_overs_of_a_writer_killed_before_its_commit(store, tmp_path):
    buffer = store.create("b")
    append(buffer, "a", 3)
    # A dead process's temporary file, and a file renamed to the next sequences whose row never
    # committed (the writer died between the rename and the commit).
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    (store.segments_dir / "b" / f".tmp-{dead}-0123").write_bytes(b"half a segment")
    (store.segments_dir / "b" / "5").write_bytes(b"not a committed segment")
    append(buffer, "b", 2)  # gets sequences 4..5: its file replaces the orphan
    assert [p for _, _, p in buffer.read(3, 10)] == [b"b:0", b"b:1"]
    buffer.commit(1)
    assert files(store, "b") == ["3", "5"]  # the dead writer's temporary file is swept


def test_a_damaged_segment_is_reported_with_its_file(store):
    buffer = store.create("b")
    append(buffer, "a", 100)
    path = store.segments_dir / "b" / "100"
    path.write_bytes(path.read_bytes()[:50])  # what a power loss can leave
    with pytest.raises(errors.BufferError, match=r"segment file .*100 holds 50 bytes"):
        buffer.read(0, 10)


def test_a_read_that_races_a_trim_reads_again_past_it(store, tmp_path, monkeypatch):
    buffer = store.create("b")
    append(buffer, "a", 5)
    append(buffer, "b", 5)
    other = SqliteStore(tmp_path / "pipeline.db")  # another process's connection: the committer
    load = SegmentFiles.load
    raced = []

    def load_after_a_trim(self, seq, size):
        if not raced:  # the first read's snapshot still sees segment 5; it is trimmed now
            raced.append(seq)
            other.open("b").commit(5)
        return load(self, seq, size)

    monkeypatch.setattr(SegmentFiles, "load", load_after_a_trim)
    got = buffer.read_batch(1, 10)
    assert raced == [5]
    assert got.column("seq").to_pylist() == list(range(6, 11))  # nothing committed comes back
    other.close()


def test_older_formats_are_refused_with_the_fix(tmp_path):
    for columns, layout in (
        ("data BLOB", "segments stored in SQLite"),
        ("id TEXT, payload BLOB", "a row per message"),
    ):
        path = tmp_path / f"{len(columns)}.db"
        with sqlite3.connect(path) as db:
            db.execute(
                f'CREATE TABLE "buf_old" (seq INTEGER PRIMARY KEY AUTOINCREMENT, first INTEGER, {columns})'
            )
        store = SqliteStore(path)
        with pytest.raises(errors.BufferError, match=f"older Tidal \\({layout}\\).*new run directory"):
            store.create("old")
        store.close()
