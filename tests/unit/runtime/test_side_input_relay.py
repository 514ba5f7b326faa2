"""Side inputs for a reduce vertex, without Spark: the driver's manager relays each value through
the pipeline's buffer backend before it stores it, and a reduce's task (no partition carried it
the values) fetches them from there into its host's directory. A real SQLite store, real files,
the manager with an explicit clock."""

from __future__ import annotations

from pathlib import Path

import pytest
from pynumaflow.sideinput import Response, SideInput

from tidal.isb.sqlite import SqliteStore
from tidal.scaling.side_inputs import SideInputValue
from tidal.spark.batch import side_input_relay, side_inputs
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.readers import BufferReader
from tidal.spark.run.side_inputs import SideInputManager
from tidal.spec import Limits, parse_pipeline

REDUCER = "tidal.examples.numaflow_side_inputs:SideInputReducer"


class Counting(SideInput):
    """``v1``, ``v2``, … one new value per call."""

    def __init__(self) -> None:
        self.calls = 0

    def retrieve_handler(self) -> Response:
        self.calls += 1
        return Response.broadcast_message(f"v{self.calls}".encode())


def spec(retriever, reduce_reads: bool = True):
    return parse_pipeline({
        "name": "si",
        "sideInputs": [{"name": "myticker", "pynumaflow": retriever, "trigger": {"schedule": "@every 5s"}}],
        "vertices": [
            {"name": "in", "source": {"generator": {"rate": 1}}},
            {"name": "count", "udf": {"reduce": REDUCER, "groupBy": {"window": {"fixed": {"length": "1s"}}}},
             "sideInputs": ["myticker"] if reduce_reads else []},
            {"name": "out", "sink": {"pynumaflow": "tidal.examples.numaflow:log_sink"},
             "sideInputs": [] if reduce_reads else ["myticker"]},
        ],
        "edges": [{"from": "in", "to": "count"}, {"from": "count", "to": "out"}],
    })  # fmt: skip


@pytest.fixture
def host_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "hosts"
    monkeypatch.setenv("TIDAL_SIDE_INPUT_ROOT", str(root))
    return root


def reduce_config(tmp_path: Path, pipeline) -> QueryConfig:
    v = pipeline.vertex("count")
    return QueryConfig("si", "count", str(tmp_path / "pipeline.db"), str(tmp_path), "count", ("out",),
                       Limits(read_batch_size=10), udf=v.udf, side_inputs=("myticker",))  # fmt: skip


def test_only_a_pipeline_whose_reduce_reads_side_inputs_relays_them():
    assert side_input_relay.relayed(spec(Counting()))
    assert not side_input_relay.relayed(spec(Counting(), reduce_reads=False))


def test_a_reduce_task_fetches_each_new_value_from_the_backend_and_never_an_older_one(tmp_path, host_root):
    pipeline = spec(Counting())
    store = SqliteStore(tmp_path / "pipeline.db")
    manager = SideInputManager(pipeline, tmp_path)
    manager.relay = side_input_relay.SideInputRelay(store).publish
    config = reduce_config(tmp_path, pipeline)
    assert side_input_relay.fetch(config) is None  # nothing relayed yet: the vertex waits
    with pytest.raises(RuntimeError, match="myticker"):
        side_input_relay.arrive(config)
    folder = side_inputs.host_dir(side_inputs.host_key(str(tmp_path)))
    assert manager.step(0.0) == ["myticker"]
    side_input_relay.arrive(config)  # a task (no TaskContext here: each call is a new task)
    assert (folder / "myticker").read_bytes() == b"v1"
    assert manager.step(5.0) == ["myticker"]
    side_input_relay.arrive(config)
    assert (folder / "myticker").read_bytes() == b"v2"
    # A task of a batch planned before the change, carrying v1, does not put it back.
    side_inputs._WRITTEN.clear()  # as another process on the host would see it
    side_inputs.materialise(
        side_inputs.Carried(side_inputs.host_key(str(tmp_path)), (("myticker", 1, b"v1"),))
    )
    assert (folder / "myticker").read_bytes() == b"v2"
    # The relay keeps only the newest snapshot: older ones are trimmed at each publish.
    buffer = store.open(side_input_relay.RELAY_BUFFER)
    for now in (10.0, 15.0, 20.0):
        manager.step(now)
    assert buffer.pending() == 1
    assert side_input_relay.latest(buffer) == {"myticker": (5, b"v5")}
    side_input_relay.arrive(config)
    assert (folder / "myticker").read_bytes() == b"v5"


def test_a_value_is_relayed_before_it_is_stored_so_a_planned_batch_finds_it(tmp_path):
    manager = SideInputManager(spec(Counting()), tmp_path)
    seen: list[tuple[int, int]] = []  # (the version relayed, the version stored at that moment)

    def relay(values: dict[str, SideInputValue]) -> None:
        stored = manager.store.read("myticker")
        seen.append((values["myticker"].version, stored.version if stored is not None else 0))

    manager.relay = relay
    manager.step(0.0)
    manager.step(5.0)
    assert seen == [(1, 0), (2, 1)]


def test_a_restart_relays_what_the_run_directory_holds_to_a_new_backend(tmp_path, host_root):
    pipeline = spec(Counting())
    SideInputManager(pipeline, tmp_path).step(0.0)  # the last run stored v1; its backend is gone
    again = SideInputManager(pipeline, tmp_path)
    again.relay = side_input_relay.SideInputRelay(SqliteStore(tmp_path / "new.db")).publish
    again.republish()
    config = reduce_config(tmp_path, pipeline)
    config.db = str(tmp_path / "new.db")
    side = side_input_relay.fetch(config)
    assert side is not None and side.values == (("myticker", 1, b"v1"),)


def test_a_new_run_on_an_old_runs_relay_sees_its_own_first_value(tmp_path, host_root):
    pipeline = spec(Counting())
    store = SqliteStore(tmp_path / "shared.db")  # a JetStream server outlives a run directory
    old = SideInputManager(pipeline, tmp_path / "old")
    old.relay = side_input_relay.SideInputRelay(store).publish
    for now in (0.0, 5.0, 10.0):
        old.step(now)
    fresh = SideInputManager(spec(Counting()), tmp_path / "new")  # versions from 1 again
    fresh.relay = side_input_relay.SideInputRelay(store).publish
    fresh.step(100.0)
    config = reduce_config(tmp_path / "new", pipeline)
    config.db = str(tmp_path / "shared.db")
    side = side_input_relay.fetch(config)
    assert side is not None and side.values == (("myticker", 1, b"v1"),)


def test_a_reduces_reader_holds_back_until_a_value_exists_and_carries_none(tmp_path, host_root):
    pipeline = spec(Counting())
    config = reduce_config(tmp_path, pipeline)
    store = SqliteStore(tmp_path / "pipeline.db")
    store.create("out")
    buffer = store.create("count")
    buffer.append([b"x"] * 4, [f"m{n}" for n in range(4)])
    reader = BufferReader(config)
    start = {"seq": 0}
    assert reader.latestOffset(start)["seq"] == 0  # no value yet: the vertex waits, as Numaflow's do
    side_inputs.SideInputStore(tmp_path).write("myticker", SideInputValue(1, 1.0, b"odd"))
    end = reader.latestOffset(start)
    assert end["seq"] == 4
    # Its read tasks run no handler: the values go to the reduce's tasks through the relay.
    assert all(p.side is None for p in reader.partitions(start, end))
