"""Real Spark over real buffers: replicas set the task count; nothing is lost or duplicated."""

from __future__ import annotations

import time

import pytest

from tidal.isb import BufferLimits
from tidal.isb.control import ControlStore
from tidal.isb.sqlite import SqliteStore
from tidal.spark.batch.config import QueryConfig
from tidal.spark.query.vertex import past_start, start_vertex
from tidal.spec import Limits

from .waits import eventually, wait_for

pytestmark = pytest.mark.spark


def start_query(spark, db, checkpoint, read_batch_size=500):
    plan = QueryConfig(
        pipeline="t",
        vertex="v",
        db=str(db),
        run_dir=str(checkpoint.parent),
        input="in",
        outputs=("out",),
        limits=Limits(read_batch_size=read_batch_size),
    )
    return start_vertex(spark, plan, checkpoint, trigger_seconds=0.2)


def drained(buffer, seq):
    """A check for :func:`eventually`: the query committed its input up to ``seq``."""

    def check() -> None:
        assert buffer.stats().committed >= seq, f"not drained: {buffer.stats()}"

    return check


def wait_committed(buffer, seq, query, timeout=300.0):
    eventually(drained(buffer, seq), timeout, f"the input committed up to {seq}", query=query, poll=0.1)


def fill(buffer, start, n):
    buffer.append(
        [f"p{i}".encode() for i in range(start, start + n)], [f"m{i}" for i in range(start, start + n)]
    )


def test_replicas_set_the_task_count_and_nothing_is_lost(spark, tmp_path):
    db = tmp_path / "pipeline.db"
    store = SqliteStore(db)
    source = store.create("in", BufferLimits(max_length=50_000))
    out = store.create("out", BufferLimits(max_length=50_000))
    control = ControlStore(db)
    control.set_replicas("v", 1)
    fill(source, 0, 2000)
    query = start_query(spark, db, tmp_path / "ckpt")
    try:
        wait_committed(source, 2000, query)
        control.set_replicas("v", 4)
        fill(source, 2000, 4000)

        def drained_in_both_task_counts() -> None:
            """The writer commits a batch's input before it records the batch (tidal.spark.query.writer)."""
            drained(source, 6000)()
            batches = control.batches("v")
            assert [b for b in batches if b.rows and b.tasks == 1], batches
            assert [b for b in batches if b.tasks == 4], batches

        eventually(drained_in_both_task_counts, 300, "batches of 1 and of 4 tasks, drained", query=query)
    finally:
        query.stop()
    batches = control.batches("v")
    before = [b for b in batches if b.rows and b.tasks == 1]
    after = [b for b in batches if b.tasks == 4]
    assert before, batches
    assert after, batches
    assert all(b.rows <= 500 for b in before)  # admission: replicas × readBatchSize
    assert all(b.rows <= 2000 for b in after)
    ids = [message_id for _, message_id, _ in out.read(0, 10_000)]
    assert len(ids) == 6000 == len(set(ids))
    assert set(ids) == {f"v:m{i}" for i in range(6000)}
    store.close()
    control.close()


def test_zero_replicas_idles_the_query_and_one_wakes_it(spark, tmp_path):
    db = tmp_path / "pipeline.db"
    store = SqliteStore(db)
    source = store.create("in")
    out = store.create("out")
    control = ControlStore(db)
    control.set_replicas("v", 0)
    fill(source, 0, 100)
    query = start_query(spark, db, tmp_path / "ckpt")
    try:
        # Past Spark's start first: on a slow box the query might not have asked for data within
        # the 3 s below, and the idle check would prove nothing.
        wait_for(lambda: past_start(query), 300, "the query's first trigger", query=query)
        time.sleep(3)
        assert out.stats().last_seq == 0 and source.stats().pending == 100
        control.set_replicas("v", 1)
        wait_committed(source, 100, query)
    finally:
        query.stop()
    assert out.stats().last_seq == 100
    store.close()
    control.close()


def test_restart_from_checkpoint_replays_without_duplicates(spark, tmp_path):
    db = tmp_path / "pipeline.db"
    store = SqliteStore(db)
    source = store.create("in")
    out = store.create("out")
    control = ControlStore(db)
    control.set_replicas("v", 2)
    fill(source, 0, 1000)
    query = start_query(spark, db, tmp_path / "ckpt")
    wait_committed(source, 1000, query)
    query.stop()
    fill(source, 1000, 1000)
    query = start_query(spark, db, tmp_path / "ckpt")
    try:
        wait_committed(source, 2000, query)
    finally:
        query.stop()
    ids = [message_id for _, message_id, _ in out.read(0, 5000)]
    assert len(ids) == 2000 == len(set(ids))
    store.close()
    control.close()
