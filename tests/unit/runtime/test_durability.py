"""``buffers.durability``: what each setting syncs, and in which order (tidal.isb.durability).

The power-cut tests (tests/powercut) prove what survives a cut; these pin the mechanics fast: the
SQLite level, the order of a segment's syncs against its row's commit, the sinks' syncs, and the
warnings and refusals at start. The syncs are the real ones; a spy only records them.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tidal import errors
from tidal.isb import durability
from tidal.isb.sqlite import SqliteStore
from tidal.spec import parse_pipeline


def spec(buffers: dict) -> dict:
    return {
        "name": "d",
        "buffers": buffers,
        "vertices": [
            {"name": "in", "source": {"generator": {"rate": 1}}},
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "in", "to": "out"}],
    }


def test_sync_is_the_default_and_os_is_the_other_choice():
    assert parse_pipeline(spec({})).buffers.durability == "sync"
    assert parse_pipeline(spec({"durability": "os"})).buffers.durability == "os"


def test_an_unknown_durability_names_the_field_and_the_choices():
    with pytest.raises(errors.SpecError) as refused:
        parse_pipeline(spec({"durability": "fast"}))
    text = str(refused.value)
    assert "buffers.durability" in text and "'sync'" in text and "'os'" in text, text


@pytest.mark.parametrize(("setting", "level"), [("sync", 2), ("os", 1)])  # FULL, NORMAL
def test_sqlite_commits_with_full_sync_only_under_sync(tmp_path, setting, level):
    store = SqliteStore(tmp_path / "b.db", durability=setting)
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == level
    store.close()


class Spy:
    """Records every sync (file or folder) and every SQLite COMMIT, in order, and lets each
    happen for real."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str]] = []
        real_fsync, real_fdatasync = os.fsync, os.fdatasync

        def name_of(fd: int) -> str:
            return os.readlink(f"/proc/self/fd/{fd}")

        def fsync(fd: int) -> None:
            self.calls.append(("sync", name_of(fd)))
            real_fsync(fd)

        def fdatasync(fd: int) -> None:
            self.calls.append(("sync", name_of(fd)))
            real_fdatasync(fd)

        monkeypatch.setattr(durability.os, "fsync", fsync)
        monkeypatch.setattr(durability.os, "fdatasync", fdatasync)

    def trace(self, conn: sqlite3.Connection) -> None:
        conn.set_trace_callback(lambda sql: self.calls.append(("sql", sql)) if sql == "COMMIT" else None)


def test_under_sync_a_segment_and_its_name_are_on_disk_before_its_row_commits(tmp_path, monkeypatch):
    store = SqliteStore(tmp_path / "b.db", durability="sync")
    buffer = store.create("edge")
    spy = Spy(monkeypatch)
    spy.trace(store.db)
    buffer.append_batch("k1", ["a", "b"], [b"1", b"2"])
    kinds = [kind for kind, _ in spy.calls]
    segment_dir = str(tmp_path / "b.db-segments" / "edge")
    synced = [what for kind, what in spy.calls if kind == "sync"]
    assert any(Path(p).name.startswith(".tmp-") for p in synced), synced  # the staged file's data
    assert segment_dir in synced, synced  # the rename's folder
    assert kinds[-1] == "sql", spy.calls  # ... and only then the row's commit
    assert [payload for _, _, payload in buffer.read(0, 10)] == [b"1", b"2"]


def test_under_os_an_append_syncs_nothing(tmp_path, monkeypatch):
    store = SqliteStore(tmp_path / "b.db", durability="os")
    buffer = store.create("edge")
    spy = Spy(monkeypatch)
    buffer.append_batch("k1", ["a"], [b"1"])
    buffer.commit(1)
    assert spy.calls == []


def test_the_file_sinks_data_and_state_are_synced_whatever_the_setting(tmp_path, monkeypatch):
    from tidal.spark.sinks.files import FileSink

    sink = FileSink(tmp_path / "out.jsonl", tmp_path / "sinks" / "out.sink")
    spy = Spy(monkeypatch)
    sink.commit(0, [sink.write(["a"], [b"x"])])
    synced = [what for kind, what in spy.calls if kind == "sync"]
    assert str(tmp_path / "sinks" / "out.sink") in synced, synced  # the state's rename
    assert str(tmp_path / "out.jsonl") in synced, synced  # the data (synced under either setting)


def test_a_parquet_batch_is_synced_in_its_task_and_its_log_entry_durably(tmp_path, monkeypatch):
    from tidal.spark.sinks.tables import ParquetSink, committed_files

    sink = ParquetSink(tmp_path / "pq", "bytes", [], lambda: "run-out-sink")
    spy = Spy(monkeypatch)
    part = sink.write(["a", "b"], [b"1", b"2"])
    in_task = [what for kind, what in spy.calls if kind == "sync"]
    assert any(p.endswith(".parquet") for p in in_task), in_task
    sink.commit(0, [part])
    synced = [what for kind, what in spy.calls if kind == "sync"]
    assert str(tmp_path / "pq") in synced  # the renamed file's folder
    assert str(tmp_path / "pq" / "_tidal_log" / "run-out-sink") in synced  # the log entry's rename
    assert len(committed_files(tmp_path / "pq")) == 1


def test_a_delta_version_syncs_its_files_and_log_entry(tmp_path, monkeypatch):
    from tidal.spark.sinks.tables import DeltaSink

    sink = DeltaSink(tmp_path / "delta", "bytes", [], lambda: "run-out-sink")
    spy = Spy(monkeypatch)
    sink.commit(0, [sink.write(["a", "b"], [b"1", b"2"])])
    synced = [what for kind, what in spy.calls if kind == "sync"]
    assert any(p.endswith("00000000000000000000.json") for p in synced), synced
    assert any(p.endswith(".parquet") for p in synced), synced
    assert str(tmp_path / "delta" / "_delta_log") in synced, synced


def test_a_run_directory_on_tmpfs_is_warned_about_under_sync_only():
    shm = Path("/dev/shm")
    if durability.filesystem_of(shm) != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm here")
    warning = durability.check_location(shm / "run", "sync")
    assert warning is not None and "tmpfs" in warning and "buffers.durability: os" in warning
    assert durability.check_location(shm / "run", "os") is None


def test_the_offset_log_of_a_batch_is_synced_with_its_folder(tmp_path, monkeypatch):
    from tidal.spark.batch.checkpoint_sync import checkpoint_of, sync_batch_offsets

    checkpoint = checkpoint_of(tmp_path, "gen")
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text("v1\n{}\n")
    (checkpoint / "metadata").write_text("{}")
    spy = Spy(monkeypatch)
    sync_batch_offsets(checkpoint, 0)
    synced = [what for kind, what in spy.calls if kind == "sync"]
    for path in ("offsets/0", "offsets", "metadata", ""):
        assert str(checkpoint / path).rstrip("/") in synced, (path, synced)


@pytest.mark.parametrize("setting", ["sync", "os"])
def test_a_reader_syncs_the_entry_of_the_batch_spark_is_planning_under_sync_only(
    tmp_path, monkeypatch, setting
):
    from tidal.spark.batch.checkpoint_sync import checkpoint_of, sync_planned_batch
    from tidal.spark.batch.config import QueryConfig

    checkpoint = checkpoint_of(tmp_path, "work")
    (checkpoint / "offsets").mkdir(parents=True)
    for batch in (8, 9, 10):  # 10 > 9 as numbers, not as names
        (checkpoint / "offsets" / str(batch)).write_text("v1\n{}\n")
    spy = Spy(monkeypatch)
    sync_planned_batch(QueryConfig("p", "work", "", str(tmp_path), "in", durability=setting))
    synced = [what for kind, what in spy.calls if kind == "sync"]
    expected = [str(checkpoint / "offsets" / "10"), str(checkpoint / "offsets")] if setting == "sync" else []
    assert synced == expected


def test_a_batch_replayed_after_a_long_outage_is_still_known(tmp_path):
    """A crash can lose the commit entry of a batch whose output was stored; the run replays it
    when it starts again, however long after. Its keys must outlive the window then (a power-cut
    test appended a generator's last batch twice after a restart of over two minutes)."""
    store = SqliteStore(tmp_path / "b.db", dedup_window=0.0)  # every key "older than the window"
    buffer = store.create("edge")
    assert buffer.append_batch("gen:p0/1-2", ["a", "b"], [b"1", b"2"]).appended == 2
    buffer.commit(2)  # the reader downstream committed: the window's clean-up runs here
    replay = buffer.append_batch("gen:p0/1-2", ["a", "b"], [b"1", b"2"])
    assert (replay.appended, replay.duplicates) == (0, 2)
    assert buffer.last_seq() == 2


def test_a_segment_a_crash_cut_short_is_refused_at_start_naming_its_file(tmp_path):
    store = SqliteStore(tmp_path / "b.db", durability="os")
    buffer = store.create("edge")
    buffer.append_batch("k1", ["a", "b"], [b"1", b"2"])
    buffer.verify()  # whole: nothing to say
    segment = tmp_path / "b.db-segments" / "edge" / "2"
    segment.write_bytes(b"")  # what a power cut leaves of a file never synced
    with pytest.raises(errors.BufferError) as refused:
        store.open("edge").verify()
    text = str(refused.value)
    assert str(segment) in text and "holds 0 bytes" in text and "--reset" in text, text


def test_a_full_disk_is_recognised_in_every_form_it_takes():
    from tidal.isb.durability import disk_full

    assert disk_full("OSError: [Errno 28] No space left on device: '/run/x'")
    assert disk_full("IOException: No space left on device")  # Spark's checkpoint, from the JVM
    assert disk_full("OperationalError: database or disk is full")  # SQLite
    assert not disk_full("OSError: [Errno 13] Permission denied")
