"""Numaflow's side inputs on Spark (local mode): a retriever in the driver on its schedule, its
value in the tasks of the vertices that read it, a new value seen by later messages while the
queries keep running (the same query and run ids), and no message handled before a value exists.

The first test is the essence of Numaflow's ``TestSimpleMapSideInputPipeline``
(``test/sideinputs-e2e``): its manifest as it is, with its HTTP source swapped for the generator
and its Redis sink for a file, so that the test can read what arrives. The second runs
numaflow-python's ``simple_sideinput`` retriever unchanged, from the copy in ``tests/data``. The
last two give a pynumaflow ``Reducer`` and an accumulator handler a side input: they run after
Spark's shuffle, and the values reach them through the buffer backend."""

from __future__ import annotations

import base64
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import yaml
from pynumaflow.sideinput import Response, SideInput

from tidal.isb.sqlite import SqliteStore
from tidal.spark.batch.rundir import run_id
from tidal.spark.batch.side_input_relay import RELAY_BUFFER, latest
from tidal.spark.batch.side_inputs import host_dir, host_key
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import manifest, parse_pipeline
from tidal.testing import delivered

from .waits import eventually

DATA = Path(__file__).parents[1] / "data" / "numaflow" / "sideinput"


def _file_sink_and_generator(data: dict, source: str, sink: str) -> dict:
    """The converted spec with the generator for ``source`` and a file sink for ``sink``."""
    for v in data["vertices"]:
        if v["name"] == source:
            v["source"] = {"generator": {"rate": 20, "msgSize": 8}}
            v.pop("limits", None)
        if v["name"] == sink:
            v["sink"] = {"file": {"path": "out.jsonl"}}
    return data


def _queries(run: PipelineRun) -> dict[str, tuple[str, str]]:
    return {name: (str(q.id), str(q.runId)) for name, q in run.queries.items()}


def test_map_side_input_e2e_a_new_value_reaches_the_running_queries(spark, tmp_path):
    raw = yaml.safe_load((DATA / "e2e" / "map-sideinput-pipeline.yaml").read_text())
    converted = manifest.convert(raw, {"sink": "tidal.examples.numaflow:log_sink"}).data
    spec = parse_pipeline(_file_sink_and_generator(converted, "in", "sink"))
    assert spec.side_inputs[0].trigger.schedule == "*/5 * * * * *"  # the e2e's own: odd, then even
    out = tmp_path / "out.jsonl"

    def payloads() -> list[str]:
        return [str(r["payload"]) for r in delivered(out)]

    def both_values_seen() -> None:
        run.check()
        seen = payloads()
        assert any(p.endswith("-odd-data") for p in seen), seen[-3:]
        assert any(p.endswith("-even-data") for p in seen), seen[-3:]

    try:
        with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
            started = _queries(run)
            eventually(both_values_seen, 120, "the map's messages with the first and the second value")
            assert _queries(run) == started  # the same queries, never restarted
            assert all(q.isActive for q in run.queries.values())
        # No message was handled before the side input had a value: each carries one.
        seen = payloads()
        assert seen and all(p.endswith(("-odd-data", "-even-data")) for p in seen)
        events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
        noted = [e for e in events if e["rule"] == "side-input"]
        assert {e["vertex"] for e in noted} == {"si-e2e"} and len(noted) >= 2
        kept = json.loads((tmp_path / "side-inputs" / "myticker.json").read_text())
        assert kept["version"] >= 2
        status = json.loads((tmp_path / "status.json").read_text())
        assert status["side_inputs"]["myticker"]["version"] == kept["version"]
    finally:
        shutil.rmtree(host_dir(host_key(str(tmp_path.absolute()), run_id(tmp_path))), ignore_errors=True)


def _numaflow_example():
    """numaflow-python's ``ExampleSideInput``, imported from the unchanged copy (the driver
    calls it; the executors never need its module)."""
    spec = importlib.util.spec_from_file_location(
        "simple_sideinput_example", DATA / "simple_sideinput" / "example.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.ExampleSideInput


def test_numaflow_pythons_simple_sideinput_retriever_runs_unchanged(spark, tmp_path):
    raw = yaml.safe_load((DATA / "simple_sideinput" / "pipeline.yaml").read_text())
    data = _file_sink_and_generator(manifest.convert(raw).data, "in", "out")
    # The example's retriever itself, on a faster trigger than its two minutes.
    data["sideInputs"][0] = {**data["sideInputs"][0], "pynumaflow": _numaflow_example()}
    data["sideInputs"][0]["trigger"] = {"schedule": "@every 2s"}
    spec = parse_pipeline(data)
    out = tmp_path / "out.jsonl"

    def values() -> list[str]:
        return [str(r["payload"]) for r in delivered(out)]

    def two_values_seen() -> None:
        run.check()
        assert len(set(values())) >= 2, set(values())

    try:
        with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
            started = _queries(run)
            eventually(two_values_seen, 120, "two of the retriever's values in the sink")
            assert _queries(run) == started
        seen = values()
        assert all(v.startswith("an example: ") for v in seen), seen[:3]
    finally:
        shutil.rmtree(host_dir(host_key(str(tmp_path.absolute()), run_id(tmp_path))), ignore_errors=True)


def test_a_pynumaflow_sink_reads_the_side_input_too(spark, tmp_path):
    # Numaflow's TestSinkWithSideInput (sideinput-sink.yaml) as it is; its images mapped to
    # Tidal's handlers, and the sink's onSuccess added as a file to read what the sink read.
    raw = yaml.safe_load((DATA / "e2e" / "sideinput-sink.yaml").read_text())
    handlers = {
        "numaflow-go/sideinput-function": "tidal.examples.numaflow_side_inputs:EvenOddTicker",
        "redis-uds": "tidal.examples.numaflow_side_inputs:sink_side_input",
    }
    data = manifest.convert(raw, handlers).data
    data["vertices"][1]["sink"]["onSuccess"] = {"file": {"path": "out.jsonl"}}
    spec = parse_pipeline(data)
    out = tmp_path / "out.jsonl"

    def both_values_read() -> None:
        run.check()
        assert {str(r["payload"]) for r in delivered(out)} >= {"odd", "even"}

    try:
        with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
            started = _queries(run)
            eventually(both_values_read, 120, "the sink's reads of both values")
            assert _queries(run) == started
    finally:
        shutil.rmtree(host_dir(host_key(str(tmp_path.absolute()), run_id(tmp_path))), ignore_errors=True)


class Counting(SideInput):
    """A retriever that broadcasts ``v1``, ``v2``, … one new value per run (it runs in the driver)."""

    def __init__(self) -> None:
        self.calls = 0

    def retrieve_handler(self) -> Response:
        self.calls += 1
        return Response.broadcast_message(f"v{self.calls}".encode())


def test_a_reducers_windows_carry_the_side_input_and_a_new_value_without_a_restart(spark, tmp_path):
    # A pynumaflow Reducer on 1 s fixed windows appends the side input's value it read to each
    # window's count (numaflow_side_inputs:SideInputReducer). It runs after Spark's shuffle, in a
    # task no read partition carried the values to (a reduce's reader carries none): the values
    # come through the buffer backend (tidal.spark.batch.side_input_relay).
    window = {"fixed": {"length": "1s"}}
    spec = parse_pipeline({
        "name": "si-reduce",
        "sideInputs": [{"name": "myticker", "pynumaflow": Counting, "trigger": {"schedule": "@every 2s"}}],
        "vertices": [
            {"name": "in", "source": {"generator": {"rate": 20, "msgSize": 8}}},
            {"name": "count", "udf": {"reduce": "tidal.examples.numaflow_side_inputs:SideInputReducer",
                                      "groupBy": {"window": window, "keyed": False}},
             "sideInputs": ["myticker"]},
            {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
        ],
        "edges": [{"from": "in", "to": "count"}, {"from": "count", "to": "out"}],
    })  # fmt: skip
    out = tmp_path / "out.jsonl"

    def versions() -> list[int]:
        """The side input's version each window's output carries (``<count>-v<version>``)."""
        found = []
        for record in delivered(out):
            count, _, value = str(record["payload"]).partition("-")
            assert int(count) > 0 and value.startswith("v"), record
            found.append(int(value[1:]))
        return found

    def a_later_value_seen() -> None:
        run.check()
        seen = set(versions())
        assert len(seen) >= 2 and max(seen) >= 2, seen

    try:
        with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
            started = _queries(run)
            eventually(a_later_value_seen, 240, "windows with the first value and a later one", poll=1.0)
            assert _queries(run) == started  # the same queries, never restarted
            assert all(q.isActive for q in run.queries.values())
        kept = json.loads((tmp_path / "side-inputs" / "myticker.json").read_text())
        seen = versions()
        # Every window carries a value the retriever broadcast; none is newer than the last one.
        assert seen and min(seen) >= 1 and max(seen) <= kept["version"], (seen, kept["version"])
        # The relay holds the value the run directory holds, and nothing older.
        relay = SqliteStore(tmp_path / "pipeline.db").open(RELAY_BUFFER)
        assert latest(relay) == {"myticker": (kept["version"], base64.b64decode(kept["value"]))}
    finally:
        shutil.rmtree(host_dir(host_key(str(tmp_path.absolute()), run_id(tmp_path))), ignore_errors=True)


def test_an_accumulators_messages_carry_the_side_input_and_a_new_value_without_a_restart(spark, tmp_path):
    # A pynumaflow accumulator handler (applyInPandasWithState's function, after the shuffle)
    # answers each message with the side input's value as it read it.
    group = {"window": {"accumulator": {"timeout": "1s"}}, "keyed": False}
    spec = parse_pipeline({
        "name": "si-accumulate",
        "sideInputs": [{"name": "myticker", "pynumaflow": Counting, "trigger": {"schedule": "@every 2s"}}],
        "vertices": [
            {"name": "in", "source": {"generator": {"rate": 10, "msgSize": 8}}},
            {"name": "acc", "udf": {"reduce": "tidal.examples.numaflow_side_inputs:accumulate_side_input",
                                    "groupBy": group},
             "sideInputs": ["myticker"]},
            {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
        ],
        "edges": [{"from": "in", "to": "acc"}, {"from": "acc", "to": "out"}],
    })  # fmt: skip
    out = tmp_path / "out.jsonl"

    def versions() -> list[int]:
        found = []
        for record in delivered(out):
            value = str(record["payload"])
            assert value.startswith("v"), record
            found.append(int(value[1:]))
        return found

    def a_later_value_seen() -> None:
        run.check()
        seen = set(versions())
        assert len(seen) >= 2 and max(seen) >= 2, seen

    try:
        with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
            started = _queries(run)
            eventually(a_later_value_seen, 240, "messages with the first value and a later one", poll=1.0)
            assert _queries(run) == started
        kept = json.loads((tmp_path / "side-inputs" / "myticker.json").read_text())
        seen = versions()
        assert seen and max(seen) <= kept["version"], (seen, kept["version"])
    finally:
        shutil.rmtree(host_dir(host_key(str(tmp_path.absolute()), run_id(tmp_path))), ignore_errors=True)
