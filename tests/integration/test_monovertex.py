"""``kind: MonoVertex`` on real Spark: one query reads the source, runs the transformer and
writes the sink; scaled as one by Numaflow's MonoVertex rules; exactly once into the tables."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import parse_pipeline

from .test_cli import tidal, wait_for
from .test_kafka import delta_ids, parquet_ids
from .waits import eventually

pytestmark = pytest.mark.spark

MONO = """
kind: MonoVertex
name: mono
source:
  generator: {{rate: {rate}, msgSize: 40, maxMessages: {count}}}
transformer: {{map: tidal.examples.udfs:upper}}
sink: {{{sink}: {{path: {path}, format: bytes}}}}
scale: {{min: {low}, max: {high}}}
controller: {{intervalSeconds: 0.5}}
"""


def test_one_query_runs_source_transformer_and_sink_with_the_replicas_as_its_tasks(spark, tmp_path):
    spec = parse_pipeline(
        # Held at 3 (min = max): the replicas are the tasks whatever the policy decides; `tidal`,
        # the default, took 4 on this backlog where Numaflow's rules had stayed at 3.
        __import__("yaml").safe_load(
            MONO.format(rate=4000, count=20_000, sink="delta", path="t", low=3, high=3)
        )
    )
    run = PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25)

    def delivered_and_recorded() -> None:
        """Every row in the table, and every batch recorded. The sink commits before its batch is
        recorded (with its read counts and delays): a table that holds every row says nothing yet
        of the last batch's record."""
        ids = delta_ids(tmp_path / "t")
        assert len(ids) == len(set(ids)) == 20_000, (len(ids), len(set(ids)))
        assert set(ids) == {f"mono:{n}" for n in range(1, 20_001)}
        batches = run.control.batches("mono")
        # min 3: three replicas, three tasks a batch
        assert max((b.tasks for b in batches), default=0) == 3, [b.tasks for b in batches]
        # Numaflow's per-pod read counts: each of the three replicas read its share, and together
        # exactly what the MonoVertex processed (its rater reads them per pod).
        reads = run.control.read_counts("mono", 3)
        assert set(reads) == {"mono-0", "mono-1", "mono-2"} and all(n > 0 for n in reads.values()), reads
        assert sum(reads.values()) == run.control.processed("mono"), reads
        delayed = sum(d.count for d in run.delivered_delays("mono", 0.0))
        assert delayed == 20_000, delayed  # its sink records the delivery delay

    def running() -> None:
        run.check()  # a failed query ends the wait with its error
        delivered_and_recorded()

    with run:
        eventually(running, 240, "every row delivered and recorded", poll=1)
        queries = [q.name for q in spark.streams.active]
    assert queries == ["mono"]  # one query, no buffer between the steps
    delivered_and_recorded()  # and nothing doubled since
    import deltalake

    table = deltalake.DeltaTable(str(tmp_path / "t")).to_pyarrow_table()
    assert table.column("payload").to_pylist()[0].startswith(b"MONO ")  # the transformer ran


def test_into_the_file_sink_every_message_once_with_the_monovertexs_ids(spark, tmp_path):
    text = MONO.format(rate=4000, count=8000, sink="file", path="out.jsonl", low=2, high=4).replace(
        ", format: bytes", ""
    )
    spec = parse_pipeline(__import__("yaml").safe_load(text))
    from tidal.testing import delivered, ids_of

    run = PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25)
    with run:
        run.wait(120, until=lambda: len(delivered(tmp_path / "out.jsonl")) >= 8000)
    ids = ids_of(delivered(tmp_path / "out.jsonl"))
    assert len(ids) == len(set(ids)) == 8000
    assert set(ids) == {f"mono:{n}" for n in range(1, 8001)}


@pytest.mark.long
def test_exactly_once_into_parquet_through_a_driver_sigkill(tmp_path):
    count = 16_000
    spec = tmp_path / "mono.yaml"
    spec.write_text(MONO.format(rate=2000, count=count, sink="parquet", path="pq", low=1, high=4))
    run_dir = tmp_path / "run"
    args = ("run", str(spec), "--run-dir", str(run_dir), "--no-metrics", "--no-live")
    first = tidal(*args, start_new_session=True)
    try:
        wait_for(lambda: len(parquet_ids(run_dir / "pq")) >= 2000, 180, "the first rows", first)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
    killed_at = len(parquet_ids(run_dir / "pq"))
    assert killed_at < count, "finished before the kill; the test proves nothing"
    second = tidal(*args, start_new_session=True)
    try:
        wait_for(lambda: len(parquet_ids(run_dir / "pq")) >= count, 240, "every row", second)
        time.sleep(2)
    finally:
        second.send_signal(signal.SIGTERM)
        out, _ = second.communicate(timeout=120)
    ids = parquet_ids(run_dir / "pq")
    assert len(ids) == len(set(ids)) == count, (len(ids), len(set(ids)))
    assert set(ids) == {f"mono:{n}" for n in range(1, count + 1)}
    assert "resumed from its checkpoints" in out
