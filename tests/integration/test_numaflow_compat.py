"""Numaflow users' code on Spark: pynumaflow handlers in the tasks, tags on their messages and
conditions on the edges, as Numaflow's even-odd example pipeline runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import Pipeline
from tidal.testing import delivered

from .waits import eventually

N = 300


def test_even_odd_routes_each_message_by_its_tags_exactly_once(spark, tmp_path):
    # numaflow's examples/2-even-odd-pipeline.yaml, fed by the generator instead of HTTP.
    spec = (
        Pipeline("even-odd")
        .source("in", generator={"rate": 2000, "maxMessages": N, "msgSize": 30})
        .pynumaflow("number", "tidal.examples.numaflow:number")
        .pynumaflow("even-or-odd", "tidal.examples.numaflow:even_odd", tags=["even-tag", "odd-tag"])
        .sink("even-sink", "file", path="even.jsonl")
        .sink("odd-sink", "file", path="odd.jsonl")
        .pynumaflow("show-keys", "tidal.examples.numaflow:prefix_keys")
        .sink("number-sink", "file", path="number.jsonl")
        .sink("logged", "pynumaflow", handler="tidal.examples.numaflow:log_sink")
        .sink("never", "file", path="never.jsonl")
        .edge("in", "number")
        .edge("number", "even-or-odd")
        .edge("even-or-odd", "even-sink", tags=["even-tag"])
        .edge("even-or-odd", "odd-sink", tags=["odd-tag"])
        .edge("even-or-odd", "show-keys", tags=["odd-tag", "even-tag"])
        .edge("show-keys", "number-sink")
        .edge("even-or-odd", "never", tags=["odd-tag", "even-tag"], operator="and")
        .edge("even-or-odd", "logged", tags=["even-tag"])
        .build()
    )
    files = {name: tmp_path / f"{name}.jsonl" for name in ("even", "odd", "number", "never")}

    def numbers(name: str) -> list[int]:
        return sorted(int(r["payload"].rpartition(":")[2]) for r in delivered(files[name]))

    def routed_exactly_once() -> None:
        assert numbers("number") == list(range(1, N + 1))  # every message once (the generator counts from 1)
        # even_odd keyed each message; the keys travelled through the buffer to the next handler
        labelled = {r["payload"] for r in delivered(files["number"])}
        assert labelled == {f"{'even' if n % 2 == 0 else 'odd'}:{n}" for n in range(1, N + 1)}
        assert numbers("even") == list(range(2, N + 1, 2))
        assert numbers("odd") == list(range(1, N + 1, 2))
        assert delivered(files["never"]) == []
        for name in ("even", "odd", "number"):
            ids = [r["id"] for r in delivered(files[name])]
            assert len(ids) == len(set(ids)), f"{name}: an id delivered twice"

    def routed_and_counted() -> None:
        """Every sink's file, and the tagger's counts: its batch is recorded after its tasks
        wrote downstream, so the sinks may hold a message before the tagger counts it."""
        run.check()  # a failed query ends the wait with its error
        routed_exactly_once()
        logged = run.control.processed("logged")
        assert logged >= N // 2, logged  # numaflow-python's log sink
        status = {s.name: s for s in run.status()}
        # The tagger routed every message somewhere: none counted as dropped.
        tagger = status["even-or-odd"]
        assert tagger.dropped == 0 and tagger.processed == N, (tagger.dropped, tagger.processed)

    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
        eventually(routed_and_counted, 300, "every message routed and counted")
    routed_exactly_once()  # and nothing doubled since


def test_numaflows_retry_loop_example_delivers_every_message_once_after_its_rounds(spark, tmp_path):
    # numaflow's examples/10-cycle-to-prev.yaml as tidal run reads it; its HTTP source is swapped
    # for the generator and its log sink for a file, to count what arrives.
    import yaml

    from tidal.spec import manifest, parse_pipeline

    examples = Path(__file__).parents[1] / "data" / "numaflow"
    data = manifest.convert(yaml.safe_load((examples / "10-cycle-to-prev.yaml").read_text())).data
    data["vertices"][0]["source"] = {"generator": {"rate": 2000, "maxMessages": 200, "msgSize": 30}}
    data["vertices"][3]["sink"] = {"file": {"path": "out.jsonl"}}
    spec = parse_pipeline(data)
    out = tmp_path / "out.jsonl"

    def delivered_once() -> None:
        records = delivered(out)
        payloads = [r["payload"] for r in records]
        # each generated message once
        assert len(payloads) == 200 and len(set(payloads)) == 200, (len(payloads), len(set(payloads)))
        assert all(r["id"].count("retry:") >= 2 for r in records)  # its id names each round's hop

    def delivered_after_three_rounds() -> None:
        """retry's batch is recorded after its tasks wrote to out's buffer: out may deliver a
        message before its last round is counted."""
        run.check()  # a failed query ends the wait with its error
        delivered_once()
        rounds = {s.name: s.processed for s in run.status()}
        # retry tags each message until it has seen it three times: every message went round
        assert rounds["retry"] >= 3 * 200 and rounds["cat"] >= 3 * 200, rounds

    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
        eventually(delivered_after_three_rounds, 240, "every message delivered after its rounds")
    delivered_once()  # and nothing doubled since


def test_the_sdks_simple_source_feeds_a_pipeline_exactly_once(spark, tmp_path):
    # numaflow-python's examples/source/simple_source, unchanged, read through the staging buffer.
    spec = (
        Pipeline("sdk-source")
        .source("in", pynumaflow="tidal.examples.numaflow:SimpleSource")
        .pynumaflow("cat", "tidal.examples.numaflow:cat")
        .sink("out", "file", path="out.jsonl")
        .chain("in", "cat", "out")
        .build()
    )
    out = tmp_path / "out.jsonl"
    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
        run.wait(120, until=lambda: len(delivered(out)) >= 500)
    records = delivered(out)
    numbers = [int(r["payload"]) for r in records]
    assert len(numbers) == len(set(numbers))  # no message twice
    assert sorted(numbers) == list(range(1, len(numbers) + 1))  # and none missing: 1, 2, 3, …
    assert "cat:in:0:0" in {r["id"] for r in records}  # the offset is the id, named by each hop


@pytest.mark.parametrize(
    ("example", "sink"),
    [
        ("1-simple-pipeline", "out"),
        ("5-auto-scaling", "out"),
        ("9-multi-partition-pipeline", "out"),
        ("20-simple-mono-vertex-builtin", "simple-mono-vertex-builtin"),
    ],
)
def test_numaflows_generator_examples_run_as_they_stand(spark, tmp_path, example, sink):
    from tidal.spec import load_pipeline

    spec = load_pipeline(Path(__file__).parents[1] / "data" / "numaflow" / f"{example}.yaml")
    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
        run.wait(120, until=lambda: run.control.processed(sink) >= 10)
        status = {s.name: s for s in run.status()}
    assert status[sink].processed >= 10 and status[sink].dead == 0
