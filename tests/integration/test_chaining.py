"""Chained pipelines (``tidal.spec.chains``) on real Spark: exactly once through a SIGKILL into
every sink a chain can end in, and the per-vertex counts a chain keeps.

The SIGKILL story runs one ``tidal run`` whose generator fans out to four branches; each branch is
a map chained into its sink (file, Parquet, Delta, Kafka), so every sink is written by a chain's
query and committed with the chain's batch ids. The driver, its JVM and its Python workers are
killed mid-run, the run is started again on the same directory, and every id is counted.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import Pipeline
from tidal.testing import delivered, ids_of

from .kafka_broker import MockKafka
from .test_cli import tidal
from .test_kafka import delta_ids, parquet_ids
from .waits import eventually, wait_for

pytestmark = pytest.mark.spark

COUNT = 12_000

BRANCHES = """
name: branches
limits: {{readBatchSize: 500}}
controller: {{intervalSeconds: 0.5}}
vertices:
  - name: gen
    source: {{generator: {{rate: 1500, maxMessages: {count}, msgSize: 30}}}}
  - {{name: to-file, udf: {{map: "tidal.examples.udfs:upper"}}}}
  - {{name: to-pq, udf: {{map: "tidal.examples.udfs:upper"}}}}
  - {{name: to-delta, udf: {{map: "tidal.examples.udfs:upper"}}}}
  - {{name: to-kafka, udf: {{map: "tidal.examples.udfs:upper"}}}}
  - {{name: file, sink: {{file: {{path: out.jsonl}}}}}}
  - {{name: pq, sink: {{parquet: {{path: pq, format: bytes}}}}}}
  - {{name: delta, sink: {{delta: {{path: delta, format: bytes}}}}}}
  - {{name: kafka, sink: {{kafka: {{bootstrapServers: "{bootstrap}", topic: chained}}}}}}
edges:
  - {{from: gen, to: to-file}}
  - {{from: gen, to: to-pq}}
  - {{from: gen, to: to-delta}}
  - {{from: gen, to: to-kafka}}
  - {{from: to-file, to: file}}
  - {{from: to-pq, to: pq}}
  - {{from: to-delta, to: delta}}
  - {{from: to-kafka, to: kafka}}
"""


def kafka_ids(kafka: MockKafka, topic: str) -> list[str]:
    """Every record's ``tidal-id`` header, duplicates included."""
    from confluent_kafka import TopicPartition

    ends = kafka.ends(topic)
    consumer = kafka.consumer(f"count-{time.time_ns()}")
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while len(seen) < sum(ends.values()) and time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=1):
            assert message.error() is None
            seen.append(dict(message.headers())["tidal-id"].decode())
    consumer.close()
    return seen


@pytest.mark.long
def test_every_chain_delivers_exactly_once_into_its_sink_through_a_driver_sigkill(tmp_path):
    """``tidal run`` SIGKILLed (driver, JVM and Python workers) mid-run, then run again on the same
    run directory: each branch is a buffered edge (the generator fans out) into a map chained
    with its sink, so this is also the CLI's own kill-and-resume story."""
    kafka = MockKafka()
    spec = tmp_path / "branches.yaml"
    spec.write_text(BRANCHES.format(count=COUNT, bootstrap=kafka.bootstrap))
    run_dir = tmp_path / "run"
    args = ("run", str(spec), "--run-dir", str(run_dir), "--no-metrics", "--no-live")
    first = tidal(*args, start_new_session=True)
    try:
        wait_for(lambda: len(delivered(run_dir / "out.jsonl")) >= 1500, 180, "the first messages", first)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
        first.communicate(timeout=30)
    assert len(delivered(run_dir / "out.jsonl")) < COUNT, "finished before the kill; the test proves nothing"
    second = tidal(*args, start_new_session=True)

    def every_branch_complete() -> None:
        for branch, ids in (
            ("to-file", ids_of(delivered(run_dir / "out.jsonl"))),
            ("to-pq", parquet_ids(run_dir / "pq")),
            ("to-delta", delta_ids(run_dir / "delta")),
        ):
            assert len(ids) == len(set(ids)) == COUNT, (branch, len(ids), len(set(ids)))
            assert set(ids) == {f"{branch}:gen:{n}" for n in range(1, COUNT + 1)}, branch
        # Kafka is at least once (docs/kafka.md): every id arrives; a replayed batch may add
        # copies, each carrying the id to de-duplicate on.
        produced = kafka_ids(kafka, "chained")
        missing = {f"to-kafka:gen:{n}" for n in range(1, COUNT + 1)} - set(produced)
        assert not missing, f"{len(missing)} ids not in the topic yet, e.g. {sorted(missing)[:5]}"
        assert len(produced) - COUNT <= COUNT // 2, len(produced)  # at most the batches in flight again

    try:
        # Every branch, Kafka's included: on a slow box the Kafka branch may finish last (#54).
        eventually(every_branch_complete, 300, "every id in all four sinks", proc=second, poll=2)
        time.sleep(2)  # anything doubled would show up now
    finally:
        second.send_signal(signal.SIGTERM)
        out, _ = second.communicate(timeout=120)
    assert "resumed from its checkpoints" in out
    # Four chains of two (each map with its sink), and the generator on its own: it fans out.
    assert "chaining: 9 vertices in 5 Spark queries" in " ".join(out.split()), out
    every_branch_complete()  # and nothing doubled since


def test_a_chain_keeps_every_vertexs_counts_and_the_sinks_delays(spark, tmp_path):
    """One query for source → filter → map → sink; status still shows each vertex: what its
    function got and passed on, and the sink's delays. (A follower's own dead letter is tested
    by test_pipeline's dead-letter story, whose source → map → sink is chained too.)"""
    spec = (
        Pipeline("counts", limits={"readBatchSize": 400})
        .source("gen", generator={"rate": 4000, "maxMessages": 4000, "msgSize": 20})
        .filter("even", "tidal.examples.udfs:even")
        .map("loud", "tidal.examples.udfs:upper")
        .sink("out", "file", path="out.jsonl")
        .build()
    )
    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
        assert [c.members for c in run.plan.chains] == [("gen", "even", "loud", "out")]
        assert list(run.queries) == ["gen"]  # one query for the four of them
        run.wait(120, until=lambda: run.control.processed("out") >= 2000)
        statuses = {s.name: s for s in run.status()}
        delays = run.delivered_delays("out", 0.0)
    assert statuses["even"].processed == 4000  # what the filter got
    assert statuses["loud"].processed == 2000 and statuses["out"].processed == 2000
    assert {s.replicas for s in statuses.values()} == {statuses["gen"].replicas}  # the head's
    assert {s.chain for s in statuses.values()} == {"gen>even>loud>out"}
    ids = ids_of(delivered(tmp_path / "out.jsonl"))
    assert len(ids) == len(set(ids)) == 2000
    assert set(ids) == {f"loud:even:gen:{n}" for n in range(2, 4001, 2)}
    assert sum(d.count for d in delays) == 2000  # every delivered message has its delay
