"""Whole pipelines on real Spark: generator or user source → Python UDF → sink, autoscaled.

Every vertex is its own streaming query on the session's Spark; the controller runs on the wall
clock with short windows so a whole scale-up / drain / zero / wake cycle fits in a minute.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tidal import errors
from tidal.scaling import Rule
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import Pipeline
from tidal.testing import delivered, ids_of

from .waits import eventually

pytestmark = pytest.mark.spark

FAST = {
    "lookbackSeconds": 4,
    "scaleUpCooldownSeconds": 2,
    "scaleDownCooldownSeconds": 3,
    "targetProcessingSeconds": 1,
    "zeroReplicaSleepSeconds": 5,
    "max": 4,
}


def file_ids(path: Path) -> list[str]:
    """The ids a file sink committed; read while a commit is appended, a half-written last line
    is not one yet."""
    return ids_of(delivered(path))


@pytest.mark.long
def test_a_burst_scales_the_udf_up_drains_goes_to_zero_and_the_next_burst_wakes_it(spark, tmp_path):
    # Bursts of 2000 msg/s for 3 s every 45 s; 1 ms of work per message in the UDF, which keeps
    # its buffer (not chained) so that it scales on its own.
    spec = (
        # Numaflow's rules: a burst's backlog scales up at once. `tidal` sizes it to drain within
        # its catch-up (one replica drains these 6,000 in ~15 s) and keeps a woken vertex for
        # three start-ups, so the first burst need not scale `work` up (its own tests:
        # tests/unit/sim/test_adaptive.py).
        Pipeline(
            "wave",
            limits={"readBatchSize": 250},
            controller={"intervalSeconds": 0.5},
            chaining=False,
            policy="numaflow",
        )
        .source(
            "gen",
            generator={
                "rate": 0,
                "shape": "bursty",
                "peak": 2000,
                "period": 45,
                "duration": 3,
                "msgSize": 40,
                "maxMessages": 12_000,
            },
            scale=FAST,
        )
        .map("work", "tidal.examples.udfs:slow_upper", scale=FAST)
        .sink("out", "file", path="out.jsonl", scale=FAST)
        .build()
    )
    run = PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25)
    out = tmp_path / "out.jsonl"

    # Each stage is asserted, not only waited for (run.wait returns when its time is up): a stage
    # that never came fails where it should have, with what was reached instead.
    def scaled_up() -> None:
        run.check()  # a failed query ends the wait with its error
        assert run.control.replicas("work") >= 2, run.control.replicas("work")

    def delivered_at_least(n: int) -> None:
        run.check()
        assert len(file_ids(out)) >= n, len(file_ids(out))

    def at_zero_replicas() -> None:
        run.check()
        assert run.control.replicas("work") == 0, run.control.replicas("work")

    with run:
        eventually(scaled_up, 120, "work scaled up")
        eventually(lambda: delivered_at_least(6000), 120, "the first burst delivered")
        eventually(at_zero_replicas, 120, "work at zero")
        at_zero = len(file_ids(out))
        eventually(lambda: delivered_at_least(12_000), 180, "the second burst delivered")
    ids = file_ids(out)
    assert len(ids) == len(set(ids)) == 12_000  # exactly once
    assert set(ids) == {f"work:gen:{n}" for n in range(1, 12_001)}
    assert at_zero == 6000  # the first burst drained before the vertex went to zero
    tasks = [b.tasks for b in run.control.batches("work")]
    assert max(tasks) >= 2, tasks  # more replicas really ran more tasks
    rules = [d.rule for d in run.controller.events.read() if d.vertex == "work"]
    # Woken by its own pending, or with the path when the source woke first.
    wakes = {Rule.WAKE_ON_PENDING, Rule.WAKE_ON_PATH}
    assert Rule.SCALE_UP in rules and Rule.SCALE_TO_ZERO in rules
    assert any(r in wakes for r in rules[rules.index(Rule.SCALE_TO_ZERO) :]), rules
    payload = json.loads(out.read_text().splitlines()[0])["payload"]
    assert payload.startswith("GEN 000000000001")  # upper-cased by the UDF


def test_fan_out_filter_and_flatmap_reach_every_sink(spark, tmp_path):
    spec = (
        Pipeline("fan")
        .source("gen", generator={"rate": 5000, "maxMessages": 1000, "msgSize": 20})
        .filter("even", "tidal.examples.udfs:even")
        .flatmap("words", "tidal.examples.udfs:words")
        .sink("evens", "file", path="evens.jsonl")
        .sink("words-out", "file", path="words.jsonl")
        .edge("gen", "even")
        .edge("gen", "words")
        .edge("even", "evens")
        .edge("words", "words-out")
        .build()
    )
    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
        run.wait(
            90,
            until=lambda: (
                run.control.processed("evens") >= 500 and run.control.processed("words-out") >= 3000
            ),
        )
    words = file_ids(tmp_path / "words.jsonl")
    # Each "gen 000000000042 ..." payload splits into 3 words: ids <id>.0, <id>.1, <id>.2
    assert len(words) == len(set(words)) == 3000
    assert "words:gen:7.2" in words
    evens = file_ids(tmp_path / "evens.jsonl")  # the even-numbered messages, and only those
    assert sorted(evens) == sorted(f"even:gen:{n}" for n in range(2, 1001, 2))
    split = run.control.batches("words")
    assert sum(b.rows for b in split) == 1000 and sum(b.written for b in split) == 3000


def test_a_udf_that_keeps_failing_stops_the_pipeline_naming_the_message(spark, tmp_path):
    lines = tmp_path / "input.txt"
    lines.write_text("hello\nworld\nthis is poison\nafter\n")
    spec = (
        Pipeline("poison")
        .source("src", user="tidal.examples.sources:LinesSource", options={"path": str(lines)})
        .map("check", "tidal.examples.udfs:fails_on_poison", retries=1)
        .sink("out", "file", path="out.jsonl")
        .build()
    )
    with (
        PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run,
        pytest.raises(errors.PipelineError) as failed,
    ):
        # Raises once the query failed; a run that never fails is told by pytest.raises, after
        # a deadline a box at half speed does not come near.
        run.wait(300)
    text = str(failed.value)
    assert "'check'" in text and "'src:3'" in text, text  # the vertex and the message id
    assert "ValueError" in text and "2 attempt(s)" in text, text
    # The user's own line, not Spark's or Tidal's frames.
    assert 'tidal/examples/udfs.py", line' in text and "in fails_on_poison" in text, text
    assert 'raise ValueError(f"cannot handle' in text and "pyspark" not in text, text
    assert file_ids(tmp_path / "out.jsonl") == []  # the failed batch wrote nothing downstream
    # Nothing lost: the batch with the poison message is still in the input of the query that
    # failed, the chain src → check → out: the source's staging buffer (src was not acked past it).
    from tidal.isb.sqlite import SqliteStore
    from tidal.spark.batch.config import input_buffer

    assert [c.members for c in run.plan.chains] == [("src", "check", "out")]
    staged = input_buffer(spec.vertex("src"))
    assert SqliteStore(tmp_path / "pipeline.db").open(staged).stats().pending == 4


DEAD_LETTER = {"file": {"path": "dead.jsonl"}}


def test_dead_letter_keeps_failing_messages_and_the_rest_flows(spark, tmp_path, caplog):
    lines = tmp_path / "input.txt"
    spec = (
        Pipeline("dead")
        .source("src", user="tidal.examples.sources:LinesSource", options={"path": str(lines)})
        .map(
            "check",
            "tidal.examples.udfs:fails_on_poison",
            retries=0,
            dead_letter={"file": {"path": "dead.jsonl"}},
        )
        .sink("out", "file", path="out.jsonl")
        .build()
    )

    def not_available() -> None:
        """No file yet: the source's pending() raises; the pipeline keeps running. (Logged once
        a trigger reported it and the controller looked: no fixed time covers both.)"""
        run.check()
        assert "not available" in caplog.text and "FileNotFoundError" in caplog.text

    def good_out_poison_dead() -> None:
        """The 90 good lines delivered and the 10 poison ones dead-lettered. A sink's file is
        committed before the batch is counted, and the last poison line may come in a later
        batch than the last good one: the wait is on all of it."""
        out = file_ids(tmp_path / "out.jsonl")
        dead = delivered(tmp_path / "dead.jsonl")
        assert len(out) == 90 and len(dead) == 10, (len(out), len(dead))
        assert {d["id"] for d in dead} == {f"src:{i}" for i in range(10, 101, 10)}
        assert all(d["error"].startswith("ValueError: cannot handle") for d in dead)
        assert set(out).isdisjoint({f"check:{d['id']}" for d in dead})

    def flowed() -> None:
        run.check()
        assert run.control.processed("out") >= 90, run.control.processed("out")
        good_out_poison_dead()

    with caplog.at_level(logging.WARNING, logger="tidal"), PipelineRun(spec, tmp_path, spark=spark) as run:
        eventually(not_available, 120, "the missing file logged as not available")
        lines.write_text("".join(f"line {i}\n" if i % 10 else f"poison {i}\n" for i in range(1, 101)))
        eventually(flowed, 180, "every line delivered or dead-lettered")
    good_out_poison_dead()  # and nothing doubled since


def test_small_buffers_and_big_batches_do_not_deadlock_the_task_slots(spark, tmp_path):
    # 2 replicas per vertex on local[2]: every task slot the session has. A generator batch may
    # take 2 × 5000 messages, but its output buffer holds at most 6000. Were it admitted whole,
    # its tasks would wait for room while holding both slots, and the map that drains the
    # buffer could never run: no progress for 5 minutes, then a BufferFull. Admission takes no
    # more than the output has room for, so nothing waits.
    fixed = {"disabled": True}
    spec = (
        # Buffers on both edges (chaining off): the test is about what fits in them.
        Pipeline("tight", limits={"readBatchSize": 5000, "bufferMaxLength": 6000}, chaining=False)
        .source(
            "gen", generator={"rate": 100_000, "maxMessages": 40_000, "msgSize": 20}, scale=fixed, replicas=2
        )
        .map("work", "tidal.examples.udfs:upper", scale=fixed, replicas=2)
        .sink("out", "blackhole", scale=fixed, replicas=2)
        .build()
    )
    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.1) as run:
        run.wait(120, until=lambda: run.control.processed("out") >= 40_000)
        assert run.buffers is not None
        held = run.buffers.open("work").stats()
    assert run.control.processed("out") == 40_000
    assert held.limits.max_length == 6000
    batches = run.control.batches("gen")
    assert max(b.rows for b in batches) <= 6000, [b.rows for b in batches]  # never more than the room
