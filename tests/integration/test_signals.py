"""Signals the policies are promised, measured by the runtime (issue #15): the replica count a
micro-batch was admitted with splits it, busy time per batch, observed ready replicas, and the
adaptive lookback in the controller. Reader and writer code run here on real SQLite, without Spark.
"""

from __future__ import annotations

import time

import pytest

from tidal import contracts
from tidal.controller import Controller, EventLog, StoreProbe
from tidal.errors import SpecError
from tidal.spark.batch.admission import task_row
from tidal.spark.batch.readers import BufferReader
from tidal.spark.query.writer import VertexWriter
from tidal.spark.sources.user import UserSourceReader
from tidal.spec import Limits, parse_pipeline
from tidal.spec.model import SourceSpec, UdfSpec, UserClassSpec
from tidal.testing import BufferRig, ManualClock


@pytest.fixture
def rig(tmp_path):
    with BufferRig(tmp_path) as r:
        r.buffer("out")
        yield r


def test_a_batch_is_split_by_the_replica_count_that_admitted_it(rig):
    rig.fill("in", 1000)
    rig.set_replicas("v", 2)
    reader = BufferReader(rig.config(limits=Limits(read_batch_size=500)))
    end = reader.latestOffset({"seq": 0})
    assert end == {"seq": 1000}
    rig.set_replicas("v", 4)  # the controller changes its mind between the two calls
    parts = reader.partitions({"seq": 0}, end)
    assert [(p.first, p.last) for p in parts] == [(1, 500), (501, 1000)]
    # The next batch is admitted and split by the new count.
    rig.fill("in", 8, start=1000)
    end2 = reader.latestOffset(end)
    assert len(reader.partitions(end, end2)) == 4


def test_writer_tasks_measure_busy_time_and_the_batch_records_it(rig):
    def slow(payload: bytes) -> bytes:
        time.sleep(0.001)
        return payload

    rig.fill("in", 200)
    rig.set_replicas("v", 2)
    config = rig.config(udf=UdfSpec(map=slow), limits=Limits(read_batch_size=100))
    reader = BufferReader(config)
    end = reader.latestOffset({"seq": 0})
    parts = reader.partitions({"seq": 0}, end)
    writer = VertexWriter(config)
    messages = [writer.write(iter([task_row(p)])) for p in parts]
    writer.commit(messages, 0)
    (batch,) = rig.control.batches("v")
    assert batch.tasks == 2 and batch.rows == 200
    assert 0.2 <= batch.busy < 5.0  # 200 calls of 1 ms, plus the reading and writing
    done = rig.control.progress("v")
    assert done.processed == 200 and done.busy == pytest.approx(batch.busy) and done.tasks == 2


def test_ready_replicas_are_what_the_batches_ran(rig):
    control = rig.control
    control.set_replicas("v", 2)
    assert control.ready_replicas("v", 2) == 2  # nothing observed yet: taken as ready
    control.record_batch("v", 0, tasks=2, rows=1000)
    time.sleep(0.01)
    control.set_replicas("v", 4)  # scale-up: not ready before Spark ran it
    assert control.ready_replicas("v", 4) == 2
    time.sleep(0.01)
    control.record_batch("v", 1, tasks=4, rows=1000)
    assert control.ready_replicas("v", 4) == 4
    time.sleep(0.01)
    control.set_replicas("v", 3)  # scale-down: at most what is asked for
    assert control.ready_replicas("v", 3) == 3
    control.record_batch("v", 2, tasks=1, rows=1)  # one message could use one task only
    assert control.ready_replicas("v", 3) == 3


def test_the_probe_hands_the_policy_observed_ready_and_busy_seconds(rig):
    spec = parse_pipeline(
        {
            "name": "t",
            "vertices": [{"name": "in", "source": {"generator": {}}}, {"name": "v", "sink": {"log": {}}}],
            "edges": [{"from": "in", "to": "v"}],
        }
    )
    rig.buffer("v")
    rig.control.record_batch("v", 0, tasks=1, rows=10, busy=0.5)
    time.sleep(0.01)
    rig.set_replicas("v", 3)
    sample = StoreProbe(spec, rig.store, rig.control).sample("v")
    assert (sample.replicas, sample.ready, sample.busy_seconds, sample.processed) == (3, 1, 0.5, 10.0)


def test_the_controller_stretches_the_lookback_over_quiet_spells(rig):
    """Numaflow's dynamic lookback: a vertex that processes every 200 s is not idle between."""
    spec = parse_pipeline(
        {
            "name": "t",
            "vertices": [
                {"name": "in", "source": {"generator": {}}},
                {"name": "v", "sink": {"log": {}}, "scale": {"lookbackSeconds": 60}},
            ],
            "edges": [{"from": "in", "to": "v"}],
        }
    )
    rig.buffer("v")
    rig.buffer("in")
    controller = Controller(
        spec, StoreProbe(spec, rig.store, rig.control), rig.control, EventLog(rig.run_dir / "e")
    )
    clock = ManualClock(1_000.0)
    batch = 0
    for second in range(0, 900, 5):
        if second % 200 == 0:  # a burst every 200 s
            rig.control.record_batch("v", batch, tasks=1, rows=100)
            batch += 1
        controller.tick(clock.now())
        clock.advance(5)
    assert controller.lookbacks()["v"] == 240  # the 200 s spell, rounded up to whole minutes


class _NoAck:
    def read(self, n: int) -> list[tuple[int, bytes]]:
        return []

    def pending(self) -> int:
        return 0


def test_a_user_source_without_ack_is_refused_with_the_field_and_the_fix(rig):
    rig.buffer("staged_v")
    config = rig.config(input="staged_v", source=SourceSpec(user=UserClassSpec(**{"class": _NoAck})))
    with pytest.raises(SpecError, match=r"source\.user\.class: .*_NoAck is not a Source: no method ack\(\)"):
        UserSourceReader(config)
    assert not isinstance(_NoAck(), contracts.Source)
