"""Shutdown tells the truth (issue #16): the final status and the report count what the sinks
committed, in order — sources first — and ``drain`` delivers what was in the buffers. On real
Spark, with a sink slow enough that batches are in flight when the stop comes."""

from __future__ import annotations

import json
import time

import pytest

from tidal.observe.report import summarize
from tidal.observe.series import SeriesLog
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import Pipeline
from tidal.testing import delivered, ids_of

from .waits import eventually

pytestmark = pytest.mark.spark


def _spec():
    return (
        Pipeline("slow", limits={"readBatchSize": 200})
        .source("gen", generator={"rate": 1500, "msgSize": 20})
        .map("work", "tidal.examples.udfs:slow_upper", scale={"min": 1, "max": 1})
        .sink("out", "file", path="out.jsonl")
        .build()
    )


def _lines(path) -> list[str]:
    """The ids the sink committed; polled while a commit is appended, a half-written last line
    is not one yet."""
    return ids_of(delivered(path))


def _final(run_dir) -> dict[str, dict]:
    record = json.loads((run_dir / "status.json").read_text())
    assert record["state"] == "stopped"
    return {v["name"]: v for v in record["vertices"]}


def _delivered_more_than(run: PipelineRun, n: int) -> None:
    run.check()  # a failed query ends the wait with its error
    got = len(_lines(run.run_dir / "out.jsonl"))
    assert got > n, got


def test_stop_now_counts_what_the_sink_committed(spark, tmp_path):
    run = PipelineRun(_spec(), tmp_path, spark=spark, trigger_seconds=0.25).start()
    try:  # a wait that runs out fails here, rather than the counts below on too few
        eventually(lambda: _delivered_more_than(run, 500), 180, "500 messages delivered")
    finally:
        run.stop()
    ids = _lines(tmp_path / "out.jsonl")
    final = _final(tmp_path)
    assert final["out"]["processed"] == len(ids) == len(set(ids)) > 0
    # Nothing committed after the status was written: the sink holds what the status says.
    time.sleep(2)
    assert len(_lines(tmp_path / "out.jsonl")) == final["out"]["processed"]
    # (No order between the vertices' counts: a batch stopped after its tasks wrote downstream but
    # before its commit is not counted upstream, while downstream may already have processed
    # its output; the replay at the next start writes the same ids, which the buffer skips.)


def test_drain_stops_the_source_first_and_delivers_what_was_in_the_buffers(spark, tmp_path):
    run = PipelineRun(_spec(), tmp_path, spark=spark, trigger_seconds=0.25).start()
    series = SeriesLog(tmp_path)

    def sampled_until_500() -> None:
        """A sample at every poll, as the live view takes them, until 500 were delivered."""
        run.check()
        series.record(run.status())
        _delivered_more_than(run, 500)

    try:
        eventually(sampled_until_500, 180, "500 messages delivered", poll=0.5)
        # The sink goes on past the last sample before the stop (sampling has ended), so the last
        # sample counts fewer than the sink delivers, whether or not it was caught up when sampled.
        sampled = [json.loads(line) for line in (tmp_path / "series.jsonl").read_text().splitlines()][-1]
        eventually(
            lambda: _delivered_more_than(run, sampled["processed"]), 120, "more delivered than sampled"
        )
        # The drain returns when its time is up, drained or not: what follows counts on it having
        # drained, so its deadline is far above what a box at half speed needs.
        run.stop(drain=True, drain_timeout=300)
    finally:
        run.stop()  # a wait that failed stops the run too (after the drain's stop: nothing left)
    final = _final(tmp_path)
    ids = _lines(tmp_path / "out.jsonl")
    generated = final["gen"]["processed"]
    assert final["out"]["processed"] == len(ids) == generated  # every generated message delivered
    assert sorted(ids) == sorted(f"work:gen:{n}" for n in range(1, generated + 1))
    # The report counts from the final status, not from the last sample taken while it ran.
    by_vertex = {s.vertex: s for s in summarize(tmp_path)}
    assert by_vertex["out"].processed == generated
    assert sampled["name"] == "out" and sampled["processed"] < generated  # the last sample taken
