"""Side inputs in the runtime, without Spark: the manager with an explicit clock, the run
directory's store, the reader that holds a batch back until the values exist and carries them,
and the task side that writes them where pynumaflow looks. Real files, a real SQLite buffer and
control record, and numaflow-python's simple_sideinput retriever as it is
(tests/data/numaflow/sideinput)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from pynumaflow.sideinput import Response, SideInput

from tidal.controller import EventLog
from tidal.isb.control import ControlStore
from tidal.isb.sqlite import SqliteStore
from tidal.scaling import Rule
from tidal.scaling.side_inputs import SideInputValue
from tidal.spark.batch import side_inputs
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.readers import BufferReader
from tidal.spark.run.side_inputs import SideInputManager
from tidal.spec import Limits, parse_pipeline
from tidal.spec.model import UdfSpec

EXAMPLE = Path(__file__).parents[2] / "data" / "numaflow" / "sideinput" / "simple_sideinput" / "example.py"


@pytest.fixture
def host_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "hosts"
    monkeypatch.setenv("TIDAL_SIDE_INPUT_ROOT", str(root))
    return root


def numaflow_example():
    """numaflow-python's ExampleSideInput, imported from the unchanged copy."""
    spec = importlib.util.spec_from_file_location("simple_sideinput_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.ExampleSideInput


def spec_with(retriever, schedule: str = "@every 10s"):
    return parse_pipeline({
        "name": "si",
        "sideInputs": [{"name": "myticker", "pynumaflow": retriever, "trigger": {"schedule": schedule}}],
        "vertices": [
            {"name": "in", "source": {"generator": {"rate": 1}}},
            {"name": "a", "udf": {"pynumaflow": "tidal.examples.numaflow_side_inputs:SideInputHandler"},
             "sideInputs": ["myticker"]},
            {"name": "b", "sink": {"pynumaflow": "tidal.examples.numaflow:log_sink"},
             "sideInputs": ["myticker"]},
        ],
        "edges": [{"from": "in", "to": "a"}, {"from": "a", "to": "b"}],
    })  # fmt: skip


def test_numaflows_example_retriever_broadcasts_every_other_run_and_the_value_is_kept_on_disk(tmp_path):
    events = EventLog(tmp_path / "events.jsonl")
    manager = SideInputManager(spec_with(numaflow_example()), tmp_path, events, replicas=lambda v: 2)
    assert manager.status() == {"myticker": None}  # no value yet: its vertices wait
    assert manager.step(1000.0) == ["myticker"]  # the first run is at once
    first = manager.store.read("myticker")
    assert first is not None and first.version == 1 and first.value.startswith(b"an example: ")
    assert manager.step(1005.0) == []  # not due yet
    assert manager.step(1010.0) == []  # due: no_broadcast_message() keeps the value
    assert manager.store.read("myticker") == first
    assert manager.step(1020.0) == ["myticker"]
    second = manager.store.read("myticker")
    assert second is not None and second.version == 2 and second.value != first.value
    assert manager.status()["myticker"] == {"version": 2, "at": 1020.0, "bytes": len(second.value)}
    # One event per new value per vertex that reads it, in the run's event log (tidal events).
    noted = [e for e in events.read() if e.rule is Rule.SIDE_INPUT]
    assert [(e.vertex, e.at) for e in noted] == [("a", 1000.0), ("b", 1000.0), ("a", 1020.0), ("b", 1020.0)]
    assert "version 2" in str(noted[-1].reason) and noted[-1].current == noted[-1].desired == 2
    # A restart reads the value back and goes on from its version.
    again = SideInputManager(spec_with(numaflow_example()), tmp_path)
    assert again.store.read("myticker") == second
    again.step(2000.0)
    assert again.store.read("myticker").version == 3
    record = json.loads((tmp_path / "side-inputs" / "myticker.json").read_text())
    assert record["version"] == 3


class Failing(SideInput):
    def __init__(self) -> None:
        self.calls = 0

    def retrieve_handler(self):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("the source of truth is down")
        if self.calls == 3:
            return "not a Response"
        return Response.broadcast_message(f"v{self.calls}".encode())


def test_a_retriever_that_fails_keeps_the_value_until_its_next_firing(tmp_path):
    failing = Failing()
    manager = SideInputManager(spec_with(failing, "@every 5s"), tmp_path)
    assert manager.step(0.0) == ["myticker"]
    assert manager.step(5.0) == []  # raised
    assert manager.step(10.0) == []  # answered something that is not a Response
    assert manager.store.read("myticker").value == b"v1"
    assert manager.step(15.0) == ["myticker"]
    assert manager.store.read("myticker").value == b"v4"
    assert failing.calls == 4


def test_a_reader_holds_its_batches_back_until_the_value_exists_then_carries_it(tmp_path, host_root):
    db = tmp_path / "pipeline.db"
    udf = UdfSpec(pynumaflow="tidal.examples.numaflow_side_inputs:SideInputHandler")
    config = QueryConfig("p", "v", str(db), str(tmp_path), "v", (), Limits(read_batch_size=10), udf=udf,
                         side_inputs=("myticker",))  # fmt: skip
    buffer = SqliteStore(db).create("v")
    buffer.append([b"x"] * 5, [f"m{n}" for n in range(5)])
    ControlStore(db).set_replicas("v", 2)
    reader = BufferReader(config)
    start = {"seq": 0}
    assert reader.latestOffset(start) == start  # no value yet: the vertex waits, as Numaflow's do
    store = side_inputs.SideInputStore(tmp_path)
    store.write("myticker", SideInputValue(1, 1.0, b"odd"))
    end = reader.latestOffset(start)
    assert end == {"seq": 5}
    parts = reader.partitions(start, end)
    assert len(parts) == 2 and all(p.side.values == (("myticker", 1, b"odd"),) for p in parts)
    list(reader.read(parts[0]))  # the task's reader, on its host: the value where pynumaflow reads it
    folder = side_inputs.host_dir(side_inputs.host_key(str(tmp_path)))
    assert (folder / "myticker").read_bytes() == b"odd"
    # A new value: the next batch planned carries it.
    store.write("myticker", SideInputValue(2, 2.0, b"even"))
    buffer.append([b"y"] * 3, [f"n{n}" for n in range(3)])
    later = reader.partitions(end, reader.latestOffset(end))
    assert later[0].side.values == (("myticker", 2, b"even"),)
    list(reader.read(later[0]))
    assert (folder / "myticker").read_bytes() == b"even"


def test_a_task_never_puts_an_older_value_back(tmp_path, host_root):
    key = side_inputs.host_key(str(tmp_path))
    side_inputs.materialise(side_inputs.Carried(key, (("t", 2, b"new"),)))
    side_inputs.materialise(side_inputs.Carried(key, (("t", 1, b"old"),)))  # planned before the change
    side_inputs._WRITTEN.clear()  # as another process on the host would see it
    side_inputs.materialise(side_inputs.Carried(key, (("t", 1, b"old"),)))
    assert (side_inputs.host_dir(key) / "t").read_bytes() == b"new"
    side_inputs.materialise(side_inputs.Carried(key, (("t", 3, b"newer"),)))
    assert (side_inputs.host_dir(key) / "t").read_bytes() == b"newer"


def test_a_run_started_anew_at_the_same_path_is_not_held_back_by_the_old_runs_versions(tmp_path, host_root):
    """``--reset`` (or a deleted run directory) starts versions at 1 again at the same path: the
    run's id in the host directory's name keeps the old run's markers out of its way."""
    old = side_inputs.host_key(str(tmp_path), "0123456789ab")
    side_inputs.materialise(side_inputs.Carried(old, (("t", 7, b"old run"),)))
    new = side_inputs.host_key(str(tmp_path), "ba9876543210")
    assert new != old
    side_inputs.materialise(side_inputs.Carried(new, (("t", 1, b"new run"),)))
    assert (side_inputs.host_dir(new) / "t").read_bytes() == b"new run"
    side_inputs.require(str(tmp_path), ("t",), "v", "ba9876543210")


def test_pynumaflow_code_reads_the_runs_directory_and_a_task_without_values_is_refused(
    tmp_path, host_root, monkeypatch
):
    import pynumaflow._constants as constants
    from pynumaflow import sideinput

    monkeypatch.setattr(constants, "SIDE_INPUT_DIR_PATH", constants.SIDE_INPUT_DIR_PATH)
    monkeypatch.setattr(sideinput, "SIDE_INPUT_DIR_PATH", sideinput.SIDE_INPUT_DIR_PATH)
    with pytest.raises(RuntimeError, match="myticker did not reach this task"):
        side_inputs.require(str(tmp_path), ("myticker",), "v")
    folder = side_inputs.point_pynumaflow(str(tmp_path))
    assert sideinput.SIDE_INPUT_DIR_PATH == constants.SIDE_INPUT_DIR_PATH == str(folder)
    side_inputs.materialise(
        side_inputs.Carried(side_inputs.host_key(str(tmp_path)), (("myticker", 1, b"odd"),))
    )
    side_inputs.require(str(tmp_path), ("myticker",), "v")
    from tidal.examples.numaflow_side_inputs import read_side_input

    assert read_side_input("myticker") == b"odd"


def test_a_file_removed_from_the_host_is_written_again_by_the_next_task(tmp_path, host_root):
    key = side_inputs.host_key(str(tmp_path))
    carried = side_inputs.Carried(key, (("t", 1, b"v"),))
    side_inputs.materialise(carried)
    (side_inputs.host_dir(key) / "t").unlink()  # a temporary-files cleaner, in a long run
    side_inputs.materialise(carried)
    assert (side_inputs.host_dir(key) / "t").read_bytes() == b"v"


def test_a_run_directorys_identity_counts_the_readers_not_the_schedule():
    from tidal.spark.batch import rundir

    base = spec_with("tidal.examples.numaflow_side_inputs:EvenOddTicker", "@every 10s")
    slower = spec_with("tidal.examples.numaflow_side_inputs:EvenOddTicker", "@hourly")
    other = spec_with("tidal.examples.numaflow_side_inputs:ExampleSideInput", "@every 10s")
    assert rundir.identity(slower)["data_hash"] == rundir.identity(base)["data_hash"]  # resumes
    assert rundir.identity(other)["data_hash"] != rundir.identity(base)["data_hash"]  # other values
    # Without side inputs the dump has no sideInputs keys: the hash of a run from before them.
    plain = parse_pipeline({
        "name": "p", "vertices": [{"name": "in", "source": {"generator": {"rate": 1}}},
                                  {"name": "out", "sink": {"log": {}}}],
        "edges": [{"from": "in", "to": "out"}],
    })  # fmt: skip
    data = plain.model_dump(by_alias=True, exclude={"controller"})
    rundir._side_inputs(data)
    assert "sideInputs" not in data and all("sideInputs" not in v for v in data["vertices"])


def test_a_kafka_sources_tasks_carry_them_too(tmp_path, host_root):
    """A vertex chained to a Kafka source runs in the Kafka reader's query: its task rows are the
    Kafka reader's, which hand the carried values over the same way (no broker needed here)."""
    from tidal.spark.sources.kafka import KafkaRanges, KafkaReader
    from tidal.spec.model import SourceSpec

    source = SourceSpec.model_validate(
        {"kafka": {"bootstrapServers": "127.0.0.1:9", "topic": "t", "groupId": "g"}}
    )
    config = QueryConfig("p", "in", str(tmp_path / "p.db"), str(tmp_path), None, source=source,
                         side_inputs=("myticker",))  # fmt: skip
    side_inputs.SideInputStore(tmp_path).write("myticker", SideInputValue(1, 1.0, b"odd"))
    (task,) = side_inputs.carry(config, [KafkaRanges([(0, 5, 9)], 0)])
    assert task.side.values == (("myticker", 1, b"odd"),)
    list(KafkaReader(config).read(task))
    side_inputs.require(str(tmp_path), ("myticker",), "in")  # on this host now


def test_the_managers_thread_outlives_a_value_it_cannot_store(tmp_path):
    import time

    from tidal.examples.numaflow_side_inputs import EvenOddTicker

    ticker = EvenOddTicker()
    (tmp_path / "side-inputs").write_text("a file where the store's folder should be")
    manager = SideInputManager(spec_with(ticker, "@every 1s"), tmp_path).start()
    try:
        deadline = time.monotonic() + 60
        while ticker.counter < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ticker.counter >= 2  # called again at its next firing, after the first write failed
        assert manager._thread is not None and manager._thread.is_alive()
    finally:
        manager.stop()
    assert not manager._thread.is_alive()
