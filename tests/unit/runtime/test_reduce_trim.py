"""When a vertex's input is trimmed. A map's at its writer's commit: its output holds the batch.
A reduce's only once Spark's commit log holds the batch, when Spark next asks for offsets: its
open windows live in the state store, and a batch replayed after a crash between the writer's
commit and the commit log rebuilds them from the batch's input (a SIGKILL there lost 16 windows
under load before: docs/testing.md). Real SQLite buffers and control record."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidal.isb.control import ControlStore
from tidal.isb.sqlite import SqliteStore
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.readers import RowsReader
from tidal.spark.query.reduce import ReduceWriter
from tidal.spark.query.writer import VertexWriter, Written
from tidal.spec import Limits
from tidal.spec.model import UdfSpec
from tidal.spec.reduce import GroupBySpec

REDUCE = UdfSpec(
    reduce="tidal.examples.numaflow:ReduceCounter",
    group_by=GroupBySpec.model_validate({"window": {"fixed": {"length": "10s"}}}),
)
MAP = UdfSpec(map="tidal.examples.udfs:upper")


def _vertex(tmp_path: Path, udf: UdfSpec) -> tuple[QueryConfig, SqliteStore]:
    db = tmp_path / "run.db"
    config = QueryConfig("p", "v", str(db), str(tmp_path), "v-in", (), Limits(read_batch_size=10), udf=udf)
    store = SqliteStore(db)
    ids = [f"m{n}" for n in range(30)]
    store.create("v-in").append([i.encode() for i in ids], ids)
    ControlStore(db).set_replicas("v", 1)
    return config, store


def _one_batch(config: QueryConfig, reader: RowsReader, writer: VertexWriter) -> dict[str, int]:
    """What Spark does for one batch on the driver: plan it, run it (no task here: no rows),
    then the writer's commit; the commit log comes next, in Spark."""
    start = {"seq": 0}
    end = reader.latestOffset(start)
    reader.partitions(start, end)
    writer.commit([Written(0, 0)], 0)
    return end


@pytest.mark.parametrize(("udf", "writer_trims"), [(MAP, True), (REDUCE, False)], ids=["map", "reduce"])
def test_the_input_is_trimmed_at_the_writers_commit_only_when_no_state_needs_it(tmp_path, udf, writer_trims):
    config, store = _vertex(tmp_path, udf)
    reader = RowsReader(config)
    writer = ReduceWriter(config) if udf is REDUCE else VertexWriter(config)
    end = _one_batch(config, reader, writer)
    wake = {} if writer_trims else {"wake": 1}  # a reduce's offsets count its query's starts
    assert end == {"seq": 10, **wake}
    assert store.open("v-in").committed() == (10 if writer_trims else 0)
    # Spark's next trigger, after the commit log: it asks for offsets from the batch's end.
    assert reader.latestOffset(end) == {"seq": 20, **wake}
    assert store.open("v-in").committed() == 10  # the reduce's batch is trimmed now, the map's was
    stats = store.open("v-in").stats()
    assert (stats.pending, stats.length) == (20, 20)  # an idle reduce counts no finished batch


def test_a_reduce_trims_each_batch_once_and_never_backwards(tmp_path):
    config, store = _vertex(tmp_path, REDUCE)
    reader = RowsReader(config)
    reader.latestOffset({"seq": 20})
    reader.latestOffset({"seq": 20})  # an idle trigger: nothing more to trim
    reader.latestOffset({"seq": 10})  # a start behind (a restarted query's first plan): no-op
    assert store.open("v-in").committed() == 20


def test_a_reduce_asks_for_one_batch_at_each_start_and_no_more(tmp_path):
    """Spark runs a batch when the offsets move: a new reduce reader's first offset counts one
    more start (``wake``), even with no input, so the windows the last batch's watermark passed
    close after a restart; later offsets keep it, so an idle reduce runs no batch."""
    config, _ = _vertex(tmp_path, REDUCE)
    start = {"seq": 30}  # everything read: the input has nothing new
    reader = RowsReader(config)
    first = reader.latestOffset(start)
    assert first == {"seq": 30, "wake": 1}  # differs from the start: Spark runs a batch
    assert reader.partitions(start, first) == []  # an empty one
    assert reader.latestOffset(first) == first  # idle from then on: no batch
    restarted = RowsReader(config)
    assert restarted.latestOffset(first) == {"seq": 30, "wake": 2}
    assert RowsReader(config).latestOffset({"seq": 20, "wake": 2})["seq"] == 30  # input moves it as ever
    mapped, _ = _vertex(tmp_path / "map", MAP)
    assert RowsReader(mapped).latestOffset(start) == start  # a stateless vertex runs no empty batch
