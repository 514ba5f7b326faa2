"""The power-cut file system (lazyfs.py) on a real FUSE mount: what survives a cut, and what does not."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from .lazyfs import LazyFS, skip_reason

pytestmark = [pytest.mark.powercut, pytest.mark.skipif(skip_reason() is not None, reason=f"{skip_reason()}")]

# A live SQLite writer: commits its rows, says so, then holds its connection open until it is killed.
WRITER = textwrap.dedent("""
    import sqlite3, sys
    db, synchronous, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    con = sqlite3.connect(db, isolation_level=None, timeout=30)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={synchronous}")
    con.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")
    for k in range(first, first + count):
        con.execute("INSERT INTO t VALUES (?, ?)", (k, "v" * 200))
    print("committed", flush=True)
    sys.stdin.read()
""")


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    return tmp_path / "disk"


@pytest.fixture
def fs(tmp_path: Path, disk: Path) -> Iterator[LazyFS]:
    with LazyFS(disk, tmp_path / "mnt") as lazy:
        yield lazy


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)  # any handle: fsync makes the inode's data durable
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rows(db: Path) -> int | str:
    """The rows of table t, or what stopped SQLite from counting them."""
    try:
        with sqlite3.connect(db) as con:
            return int(con.execute("SELECT count(*) FROM t").fetchone()[0])
    except sqlite3.DatabaseError as e:
        return str(e)


def start_writers(db: Path, synchronous: str, ranges: list[tuple[int, int]]) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), synchronous, str(a), str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for a, n in ranges
    ]


def kill_when_committed(writers: list[subprocess.Popen[str]]) -> None:
    """Waits until each writer committed everything, then SIGKILLs it (the caller's part of a cut)."""
    for proc in writers:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "committed", f"writer failed: {proc.wait()}"
    for proc in writers:
        proc.kill()
        proc.wait()


def test_synced_data_survives_a_cut(fs: LazyFS, disk: Path) -> None:
    with open(fs.mount / "a.bin", "wb") as f:
        f.write(b"x" * 10_000)
        f.flush()
        os.fsync(f.fileno())
        f.write(b"unsynced tail")
    stats = fs.cut()
    assert stats["fsyncs"] == 1 and stats["bytes_synced"] == 10_000 and stats["dirty_files"] == 1
    assert (disk / "a.bin").read_bytes() == b"x" * 10_000
    fs.remount()
    assert (fs.mount / "a.bin").read_bytes() == b"x" * 10_000


def test_unsynced_data_is_readable_until_a_cut_then_lost(fs: LazyFS, disk: Path) -> None:
    new, old = fs.mount / "new.txt", fs.mount / "old.txt"
    old.write_bytes(b"synced-v1")
    fsync_file(old)
    new.write_bytes(b"hello")
    with open(new, "ab") as f:  # O_APPEND: the kernel puts it at the (overlay's) end
        f.write(b" world")
    with open(old, "r+b") as f:
        f.write(b"SYNCED")  # overwrites synced bytes, unsynced
    # Read-your-writes in another process, and the sizes it sees; nothing reached the disk yet.
    seen = subprocess.run(["cat", str(new), str(old)], capture_output=True, check=True).stdout
    assert seen == b"hello world" + b"SYNCED-v1"
    assert new.stat().st_size == 11 and (disk / "new.txt").stat().st_size == 0
    lost = fs.cut()["dirty_bytes"]
    assert lost >= 2 * 4096
    assert (disk / "new.txt").read_bytes() == b""  # created (metadata is eager), its data gone
    assert (disk / "old.txt").read_bytes() == b"synced-v1"


def test_metadata_is_eager_and_truncate_clips_the_overlay(fs: LazyFS, disk: Path) -> None:
    (fs.mount / "d").mkdir()
    (fs.mount / "gone").mkdir()
    (fs.mount / "gone").rmdir()
    f = fs.mount / "d" / "f"
    f.write_bytes(b"a" * 9000)
    os.truncate(f, 5000)  # eager: the disk's file is 5000 bytes (of zeros) now
    assert f.read_bytes() == b"a" * 5000
    os.chmod(f, 0o600)
    os.utime(f, ns=(1_000_000_000, 2_000_000_000))
    assert f.stat().st_mtime_ns == 2_000_000_000 and os.listdir(fs.mount / "d") == ["f"]
    (fs.mount / "x").write_bytes(b"x")
    os.unlink(fs.mount / "x")
    fs.cut()
    assert sorted(os.listdir(disk)) == ["d"]
    assert (disk / "d" / "f").read_bytes() == bytes(5000)  # the size survives, the data does not
    assert (disk / "d" / "f").stat().st_mode & 0o777 == 0o600


def test_sqlite_wal_full_keeps_every_commit_and_off_loses_them(fs: LazyFS, disk: Path) -> None:
    writers = start_writers(fs.mount / "full.db", "FULL", [(0, 50)])
    writers += start_writers(fs.mount / "off.db", "OFF", [(0, 50)])
    kill_when_committed(writers)
    assert rows(fs.mount / "full.db") == rows(fs.mount / "off.db") == 50  # both readable before the cut
    fs.cut()
    assert rows(disk / "full.db") == 50
    off = rows(disk / "off.db")
    print(f"synchronous=OFF after the cut: {off!r}")
    assert off != 50  # nothing was ever fsynced: the database file itself is empty
    # The surviving database recovers its WAL through the mount and takes new commits.
    fs.remount()
    kill_when_committed(start_writers(fs.mount / "full.db", "FULL", [(50, 10)]))
    assert rows(fs.mount / "full.db") == 60


def test_two_processes_share_a_sqlite_database(fs: LazyFS, disk: Path) -> None:
    db = fs.mount / "shared.db"
    with sqlite3.connect(db) as con:  # created first, so that the writers do not race to set WAL up
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    con.close()
    writers = start_writers(db, "FULL", [(0, 150), (1000, 150)])
    seen = [rows(db) for _ in range(5)]  # a third process (this one) reads while they write
    kill_when_committed(writers)
    assert all(isinstance(n, int) for n in seen), seen
    assert rows(db) == 300
    fs.cut()
    assert rows(disk / "shared.db") == 300
    with sqlite3.connect(disk / "shared.db") as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()


def test_rename_moves_only_what_was_synced(fs: LazyFS, disk: Path) -> None:
    final, safe = fs.mount / "final", fs.mount / "safe"
    final.write_bytes(b"old")
    fsync_file(final)
    (fs.mount / "tmp1").write_bytes(b"new, never synced")
    os.replace(fs.mount / "tmp1", final)  # the unsafe pattern: no fsync before the rename
    (fs.mount / "tmp2").write_bytes(b"new, synced")
    fsync_file(fs.mount / "tmp2")
    os.replace(fs.mount / "tmp2", safe)  # the safe pattern: fsync, rename, fsync the directory
    dir_fd = os.open(fs.mount, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dir_fd)
    os.close(dir_fd)
    assert final.read_bytes() == b"new, never synced"
    stats = fs.cut()
    assert stats["dir_fsyncs"] == 1
    assert (disk / "final").read_bytes() == b""  # the old content is gone and the new one lost
    assert (disk / "safe").read_bytes() == b"new, synced"
    assert sorted(os.listdir(disk)) == ["final", "safe"]


def test_pyarrow_writes_and_an_fsync_through_another_handle(fs: LazyFS, disk: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"k": list(range(5000)), "v": [f"row {k}" for k in range(5000)]})
    pq.write_table(table, fs.mount / "t.parquet")
    pq.write_table(table, fs.mount / "unsynced.parquet")
    assert pq.read_table(fs.mount / "t.parquet").equals(table)
    fsync_file(fs.mount / "t.parquet")
    fs.cut()
    assert pq.read_table(disk / "t.parquet").equals(table)
    assert (disk / "unsynced.parquet").stat().st_size == 0


def test_a_hard_link_shares_the_unsynced_data_and_keeps_what_was_synced(fs: LazyFS, tmp_path: Path) -> None:
    """delta-rs commits a table version by linking its temporary file to the version's name."""
    mnt = tmp_path / "mnt"
    (mnt / "tmp").write_bytes(b"version")
    fsync_file(mnt / "tmp")
    os.link(mnt / "tmp", mnt / "00.json")
    (mnt / "tmp").unlink()
    with open(mnt / "00.json", "ab") as f:
        f.write(b" and more")  # unsynced
    assert (mnt / "00.json").read_bytes() == b"version and more"
    fs.cut()
    fs.remount()
    assert (mnt / "00.json").read_bytes() == b"version"
    assert not (mnt / "tmp").exists()
