"""Joins on Spark: several edges into one vertex, one input buffer that every upstream writes.

Back pressure from the join reaches every upstream: while the join is stopped its buffer fills,
each upstream's writes stop (none lost, none dropped), and once the join runs again both resume
and every message of both branches arrives exactly once.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tidal.api.auth import Caller
from tidal.spark.run.operations import RunOperations
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import parse_pipeline
from tidal.testing import delivered

from .waits import eventually

pytestmark = pytest.mark.spark

SENT, ROOM, BATCH = 300, 100, 30


def test_a_stopped_join_holds_back_every_upstream_and_both_resume_when_it_drains(spark, tmp_path):
    spec = parse_pipeline(
        {
            "name": "join-back-pressure",
            # batches of 30 into a buffer of 100: two writers that each took what they saw free
            # would pass its length between them
            "limits": {"readBatchSize": BATCH},
            "vertices": [
                {"name": "left", "source": {"generator": {"rate": 2000, "maxMessages": SENT, "msgSize": 24}}},
                {
                    "name": "right",
                    "source": {"generator": {"rate": 2000, "maxMessages": SENT, "msgSize": 24}},
                },
                {
                    "name": "join",
                    "udf": {"pynumaflow": "tidal.examples.numaflow:cat"},
                    "replicas": 0,  # stopped until the test scales it
                    "scale": {"disabled": True},
                    "limits": {"bufferMaxLength": ROOM, "bufferUsageLimit": 0.8},
                },
                {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
            ],
            "edges": [
                {"from": "left", "to": "join"},
                {"from": "right", "to": "join"},
                {"from": "join", "to": "out"},
            ],
        }
    )
    out = tmp_path / "out.jsonl"

    def branch(record_id: str) -> str:
        return "left" if "left" in record_id else "right"

    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
        buffer = run.buffers.open("join")

        def both_held_at_the_full_buffer() -> None:
            run.check()  # a failed query ends the wait with its error
            stats = buffer.stats()
            assert stats.full, stats  # the join's buffer reached its usage limit
            read = {v: run.control.processed(v) for v in ("left", "right")}
            # both wrote into it, neither got everything through: each is held back
            assert all(0 < n < SENT for n in read.values()), read
            # what the upstreams read is what the buffer holds: nothing lost on the way
            assert sum(read.values()) == stats.length, (read, stats.length)

        eventually(both_held_at_the_full_buffer, 60, "both upstreams held at the join's full buffer")
        held = {v: run.control.processed(v) for v in ("left", "right")}
        time.sleep(3)  # a dozen triggers: a writer that was not held would move on
        both_held_at_the_full_buffer()
        assert {v: run.control.processed(v) for v in ("left", "right")} == held
        assert buffer.stats().length <= ROOM
        assert run.control.dropped("left") == run.control.dropped("right") == 0

        RunOperations(run).set_scale("join", 1, None, Caller("127.0.0.1", "test"))

        def every_message_of_both_branches_once() -> None:
            run.check()
            ids = [r["id"] for r in delivered(out)]
            assert Counter(branch(i) for i in ids) == {"left": SENT, "right": SENT}, Counter(map(branch, ids))
            assert len(set(ids)) == len(ids), "an id delivered twice"

        eventually(every_message_of_both_branches_once, 120, "both branches drained through the join")
        assert run.control.processed("left") == run.control.processed("right") == SENT
    every_message_of_both_branches_once()  # and nothing doubled since
