"""A replayed micro-batch writes nothing twice, even when the replica count changed in between.

The writer and the reader's planning run here in this process, without a Spark session (the
code a Spark task runs, on real SQLite): that is what lets the test fail a batch half-way on
purpose, which a live query does not allow.
"""

from __future__ import annotations

from tidal.spark.batch.admission import partition_batch, task_row
from tidal.spark.query.writer import VertexWriter
from tidal.spec import Limits
from tidal.spec.model import UdfSpec
from tidal.testing import BufferRig


def setup(tmp_path, udf=None, limits=None):
    rig = BufferRig(tmp_path)  # tidal.testing: real SQLite buffers and control record
    rig.fill("in", 1000)
    out = rig.buffer("out")
    plan = rig.config(limits=limits or Limits(read_batch_size=1000), udf=udf)
    return rig.store, rig.control, plan, out


def test_a_replay_after_a_replica_change_reuses_the_split_and_writes_nothing_twice(tmp_path):
    store, control, plan, out = setup(tmp_path)
    control.set_replicas("v", 2)
    first_try = partition_batch(plan, 1, 1000, None)
    assert [(r.first, r.last) for r in first_try] == [(1, 500), (501, 1000)]
    writer = VertexWriter(plan)
    writer.write(iter([task_row(first_try[0])]))  # task 0 stored its output, then the driver died
    assert out.stats().last_seq == 500

    control.set_replicas("v", 4)  # the controller scaled up before the restart
    replay = partition_batch(plan, 1, 1000, None)
    assert [(r.first, r.last) for r in replay] == [(1, 500), (501, 1000)]  # the same tasks as before
    messages = [writer.write(iter([task_row(r)])) for r in replay]
    writer.commit(messages, 0)

    ids = [message_id for _, message_id, _ in out.read(0, 5000)]
    assert ids == [f"v:m{i}" for i in range(1000)]
    assert store.open("in").stats().committed == 1000
    # The next batch is new: it is split by the replica count of now.
    store.open("in").append([b"x"] * 8, [f"n{i}" for i in range(8)])
    assert len(partition_batch(plan, 1001, 1008, None)) == 4
    store.close()
    control.close()


def test_a_flatmap_that_outgrows_its_piece_is_appended_in_parts_and_replays_cleanly(tmp_path):
    # bufferMaxLength 4000 × 0.8 / 4: pieces of 800 inputs. With 5 outputs per input a piece
    # makes 4000 messages, more than one append may hold, so they go in 5 keyed parts.
    udf = UdfSpec(flatmap="tidal.examples.udfs:words", retries=0)
    store, control, plan, out = setup(tmp_path, udf, Limits(read_batch_size=1000, buffer_max_length=4000))
    src = store.open("in")
    src.commit(1000)
    src.append([b"a b c d e"] * 1000, [f"w{i}" for i in range(1000)])
    control.set_replicas("v", 1)
    ranges = partition_batch(plan, 1001, 2000, None)
    writer = VertexWriter(plan)
    writer.write(iter([task_row(ranges[0])]))
    writer.write(iter([task_row(ranges[0])]))  # the same task again: a retry
    ids = [message_id for _, message_id, _ in out.read(0, 10_000)]
    assert len(ids) == 5000 == len(set(ids))
    assert ids[:5] == [f"v:w0.{k}" for k in range(5)]
    store.close()
    control.close()
