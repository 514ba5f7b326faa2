"""A Delta table's unsynced tail, as a power cut leaves it, is removed at a run's start, and the
batch it held is written again exactly once (a CI run found a table whose first entry was empty)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable

from tidal import errors
from tidal.spark.sinks.connector import repair_sinks
from tidal.spark.sinks.delta_log import repair_delta_tail
from tidal.spark.sinks.tables import DeltaSink
from tidal.spec import parse_pipeline


def _commit(sink: DeltaSink, batch: int, n: int = 3) -> None:
    ids = pa.array([f"b{batch}:{i}" for i in range(n)], pa.string())
    payloads = pa.array([b"x"] * n, pa.binary())
    sink.commit(batch, [sink.write(ids, payloads)])


def _ids(path: Path) -> list[str]:
    return DeltaTable(str(path)).to_pyarrow_table(columns=["id"]).column("id").to_pylist()


def _entry(path: Path, version: int) -> Path:
    return path / "_delta_log" / f"{version:020d}.json"


def _sink(path: Path) -> DeltaSink:
    return DeltaSink(path, "bytes", [], lambda: "run-v-sink")


def test_an_empty_first_entry_is_removed_and_its_batch_written_again_once(tmp_path):
    sink = _sink(tmp_path / "d")
    _commit(sink, 0)
    _entry(tmp_path / "d", 0).write_text("")  # a cut before the sync: the name, no bytes
    with pytest.raises(Exception, match="No table metadata"):
        DeltaTable(str(tmp_path / "d"))
    done = repair_delta_tail(tmp_path / "d")
    assert len(done) == 1 and "version 0" in done[0], done
    _commit(sink, 0)
    _commit(sink, 1)
    assert sorted(_ids(tmp_path / "d")) == sorted(f"b{b}:{i}" for b in (0, 1) for i in range(3))


@pytest.mark.parametrize("cut", ["half", "newline", "data-short", "data-lost"])
def test_a_torn_newest_version_is_removed_and_its_batch_goes_again(tmp_path, cut):
    path = tmp_path / "d"
    sink = _sink(path)
    for batch in range(3):
        _commit(sink, batch)
    entry = _entry(path, 2)
    text = entry.read_text()
    added = [path / json.loads(line)["add"]["path"] for line in text.splitlines() if '"add"' in line]
    if cut == "half":
        entry.write_text(text[: len(text) // 2])
    elif cut == "newline":
        entry.write_text(text.rpartition("\n")[0] + "\n")  # cut just after a line: the txn lost
    elif cut == "data-short":
        added[0].write_bytes(added[0].read_bytes()[:10])
    else:
        added[0].unlink()
    done = repair_delta_tail(path)
    assert [("version 2" in d) for d in done] == [True], done
    assert not entry.exists()
    if cut.startswith("data"):  # a torn entry's files are unknown: orphans that Delta never reads
        assert not any(f.exists() for f in added)
    assert DeltaTable(str(path)).version() == 1
    _commit(sink, 1)  # a replay of a version that stayed: skipped
    _commit(sink, 2)
    ids = _ids(path)
    assert sorted(ids) == sorted(f"b{b}:{i}" for b in range(3) for i in range(3)), ids


def test_a_whole_table_is_left_as_it_is(tmp_path):
    sink = _sink(tmp_path / "d")
    for batch in range(2):
        _commit(sink, batch)
    before = sorted(p.name for p in (tmp_path / "d").rglob("*"))
    assert repair_delta_tail(tmp_path / "d") == []
    assert repair_delta_tail(tmp_path / "absent") == []
    assert sorted(p.name for p in (tmp_path / "d").rglob("*")) == before


def test_a_torn_entry_below_the_newest_is_refused_naming_it(tmp_path):
    sink = _sink(tmp_path / "d")
    for batch in range(3):
        _commit(sink, batch)
    _entry(tmp_path / "d", 1).write_text('{"commitInfo": ')
    with pytest.raises(errors.RunDirectoryError, match=r"00000000000000000001\.json.*not the newest"):
        repair_delta_tail(tmp_path / "d")


def test_a_torn_checkpoint_is_removed_and_the_table_reads_from_its_entries(tmp_path):
    from deltalake import write_deltalake

    path = tmp_path / "d"
    for _ in range(100):  # delta-rs writes a checkpoint at version 99
        write_deltalake(str(path), pa.table({"id": ["a"]}), mode="append")
    checkpoint = path / "_delta_log" / f"{99:020d}.checkpoint.parquet"
    assert checkpoint.exists()
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    with pytest.raises(Exception):  # noqa: B017 — delta-rs's own error for a torn checkpoint
        DeltaTable(str(path)).to_pyarrow_table()
    done = repair_delta_tail(path)
    assert len(done) == 1 and "checkpoint" in done[0], done
    assert not (path / "_delta_log" / "_last_checkpoint").exists()
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 100


def test_the_run_mends_every_delta_sink_of_its_spec_fallbacks_and_dead_letters_too(tmp_path):
    spec = parse_pipeline(
        yaml.safe_load(
            """
name: mend
vertices:
  - name: in
    source: {generator: {rate: 1}}
  - name: work
    udf: {map: "tidal.examples.udfs:upper", deadLetter: {delta: {path: dead}}}
  - name: out
    sink:
      delta: {path: main}
      retryStrategy: {onFailure: fallback}
      fallback: {delta: {path: aside}}
edges:
  - {from: in, to: work}
  - {from: work, to: out}
"""
        )
    )
    for table in ("dead", "main", "aside"):
        _commit(_sink(tmp_path / table), 0)
        _entry(tmp_path / table, 0).write_text("")
    done = repair_sinks(spec, tmp_path)
    assert sorted(d.split(" of Delta table ")[1].split(",")[0] for d in done) == sorted(
        str(tmp_path / t) for t in ("aside", "dead", "main")
    ), done


def test_a_checkpoint_of_a_removed_version_goes_with_it(tmp_path):
    from deltalake import write_deltalake

    path = tmp_path / "d"
    for _ in range(100):  # delta-rs writes a checkpoint at version 99
        write_deltalake(str(path), pa.table({"id": ["a"]}), mode="append")
    lines = _entry(path, 99).read_text().splitlines()
    added = [path / json.loads(line)["add"]["path"] for line in lines if '"add"' in line]
    added[0].write_bytes(b"")  # version 99's data lost, its entry and checkpoint whole
    done = repair_delta_tail(path)
    assert any("version 99" in d for d in done), done
    assert not list((path / "_delta_log").glob("*.checkpoint*.parquet"))
    assert not (path / "_delta_log" / "_last_checkpoint").exists()
    assert DeltaTable(str(path)).version() == 98
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 99
