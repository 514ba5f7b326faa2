"""Numaflow's ``onFull: discardLatest`` on Spark (its e2e TestDropOnFull, with the generator for
its HTTP source): the sink is held at 0 replicas, so its buffer fills; what does not fit is
dropped and counted, and the writer is never held back."""

from __future__ import annotations

import pytest

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import parse_pipeline

from .waits import eventually

pytestmark = pytest.mark.spark

SENT, ROOM = 500, 100


def test_a_full_buffer_drops_the_newest_messages_and_counts_them(spark, tmp_path):
    spec = parse_pipeline(
        {
            "name": "drop-on-full",
            "limits": {"readBatchSize": 10},
            "vertices": [
                {"name": "in", "source": {"generator": {"rate": 200, "maxMessages": SENT, "msgSize": 20}}},
                {
                    "name": "out",
                    "replicas": 0,
                    "scale": {"disabled": True},
                    "sink": {"blackhole": {}},
                    # its own buffer's limits (Numaflow's vertex limits), over the pipeline's
                    "limits": {"bufferMaxLength": ROOM, "bufferUsageLimit": 1.0},
                },
            ],
            "edges": [{"from": "in", "to": "out", "onFull": "discardLatest"}],
        }
    )

    def all_read_the_rest_dropped() -> None:
        run.check()
        assert run.control.processed("in") == SENT, run.control.processed("in")

    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
        eventually(all_read_the_rest_dropped, 240, "every generated message read, none held back")
        stored = run.buffers.open("out").stats().length
        dropped = run.control.dropped("in")
        reasons = run.control.drops("in")
    assert stored == ROOM and dropped == SENT - ROOM, (stored, dropped)
    assert reasons == {"buffer-full": SENT - ROOM}  # and why, as Numaflow's reason="buffer-full"
