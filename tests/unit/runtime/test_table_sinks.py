"""Parquet and Delta sinks: exactly once through replays, a commit that crashed half-way, bad payloads."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tidal.spark.sinks.tables import DeltaSink, ParquetSink, SinkError, committed_files


def messages(first: int, last: int, region: str = "eu") -> tuple[pa.Array, pa.Array]:
    ids = pa.array([f"m{i}" for i in range(first, last + 1)], pa.string())
    payloads = pa.array([json.dumps({"n": i, "region": region}).encode() for i in range(first, last + 1)])
    return ids, payloads


def run(name: str = "r1"):
    return lambda: name


def test_parquet_commits_once_and_a_replay_writes_nothing_twice(tmp_path):
    sink = ParquetSink(tmp_path / "t", "json", ["region"], run())
    parts = [sink.write(*messages(1, 50)), sink.write(*messages(51, 100, "us"))]
    sink.commit(0, parts)
    replay = [sink.write(*messages(1, 100))]  # the same batch again, split differently
    sink.commit(0, replay)
    files = committed_files(tmp_path / "t")
    assert sorted(f.parent.name for f in files) == ["region=eu", "region=us"]
    table = pq.read_table(files[0].parent.parent, partitioning="hive")
    assert sorted(table.column("n").to_pylist()) == list(range(1, 101))
    assert not list((tmp_path / "t" / "_tidal_tmp").iterdir())  # the replay's temporaries are gone


def test_parquet_a_commit_that_crashed_after_its_renames_is_redone_without_leftovers(tmp_path):
    sink = ParquetSink(tmp_path / "t", "bytes", [], run())
    parts = [sink.write(*messages(1, 10)), sink.write(*messages(11, 20)), sink.write(*messages(21, 30))]
    sink.commit(3, parts)
    (tmp_path / "t" / "_tidal_log" / "r1" / f"{3:012d}.json").unlink()  # crashed before the log entry
    sink.commit(3, [sink.write(*messages(1, 30))])  # the replay: one task this time
    files = committed_files(tmp_path / "t")
    assert len(files) == 1 and len(list((tmp_path / "t").glob("part-*.parquet"))) == 1
    assert pq.read_table(files).num_rows == 30


def test_a_new_run_in_the_same_table_is_not_taken_for_a_replay(tmp_path):
    ParquetSink(tmp_path / "t", "json", [], run("r1")).commit(
        0, [ParquetSink(tmp_path / "t", "json", [], run("r1")).write(*messages(1, 5))]
    )
    second = ParquetSink(tmp_path / "t", "json", [], run("r2"))
    second.commit(0, [second.write(*messages(6, 10))])
    assert pq.read_table(committed_files(tmp_path / "t")).num_rows == 10


def test_a_payload_that_is_not_a_json_object_names_the_message_and_the_fix(tmp_path):
    sink = ParquetSink(tmp_path / "t", "json", [], run())
    with pytest.raises(SinkError, match=r"message bad: payload is not JSON .*deadLetter"):
        sink.write(pa.array(["ok", "bad"]), pa.array([b'{"a": 1}', b"not json"]))
    with pytest.raises(SinkError, match="partitionBy field 'region'"):
        ParquetSink(tmp_path / "t", "json", ["region"], run()).write(pa.array(["x"]), pa.array([b'{"a": 1}']))


def test_delta_writes_one_transaction_per_batch_and_skips_a_replay(tmp_path):
    from deltalake import DeltaTable

    sink = DeltaSink(tmp_path / "d", "json", ["region"], run())
    sink.commit(0, [sink.write(*messages(1, 40)), sink.write(*messages(41, 60, "us"))])
    sink.commit(1, [sink.write(*messages(61, 70))])
    sink.commit(1, [sink.write(*messages(61, 70))])  # a replay after a crash
    table = DeltaTable(str(tmp_path / "d"))
    assert table.version() == 1  # two transactions: batches 0 and 1
    assert table.transaction_version("tidal-r1") == 1
    n = pa.table(table.to_pyarrow_dataset().to_table()).column("n").to_pylist()
    assert sorted(n) == list(range(1, 71))
    assert table.metadata().partition_columns == ["region"]
