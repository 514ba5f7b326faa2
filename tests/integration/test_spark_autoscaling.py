"""The controller autoscales a real Spark vertex: backlog → more tasks → drained → zero → woken.

Real Spark (local mode), real SQLite buffers, the controller on the wall clock in its thread,
with short Numaflow windows and cooldowns so the whole cycle fits in well under a minute.
"""

from __future__ import annotations

import time

import pytest

from tidal.controller import Controller, EventLog, StoreProbe
from tidal.isb import BufferLimits
from tidal.isb.control import ControlStore
from tidal.isb.sqlite import SqliteStore
from tidal.scaling import Rule
from tidal.spark.config import QueryConfig
from tidal.spark.vertex import start_vertex
from tidal.spec import Pipeline

pytestmark = pytest.mark.spark

SCALE = {
    "lookbackSeconds": 4,
    "scaleUpCooldownSeconds": 2,
    "scaleDownCooldownSeconds": 2,
    "targetProcessingSeconds": 1,
    "max": 4,
}


def wait_for(condition, query, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_controller_scales_a_spark_vertex_up_down_to_zero_and_wakes_it(spark, tmp_path):
    spec = (
        Pipeline(
            "auto",
            limits={"bufferMaxLength": 100_000, "readBatchSize": 200},
            controller={"intervalSeconds": 0.5},
        )
        .source("in", generator={"rate": 0})
        .map("work", "tidal.examples.udfs:upper", scale=SCALE)
        .sink("out", "blackhole")
        .build()
    )
    db = tmp_path / "pipeline.db"
    store = SqliteStore(db)
    limits = BufferLimits(100_000)
    work, out = store.create("work", limits), store.create("out", limits)
    control = ControlStore(db)
    control.set_replicas("work", 1)
    n = 12_000
    work.append([b"m%d" % i for i in range(n)], [f"m{i}" for i in range(n)])
    events = EventLog(tmp_path / "events.jsonl")
    controller = Controller(spec, StoreProbe(spec, store, control), control, events)
    plan = QueryConfig(
        pipeline="auto",
        vertex="work",
        db=str(db),
        run_dir=str(tmp_path),
        input="work",
        outputs=("out",),
        limits=spec.limits,
        udf=spec.vertex("work").udf,
    )
    query = start_vertex(spark, plan, tmp_path / "ckpt", trigger_seconds=0.2)
    controller.start()
    try:
        wait_for(lambda: control.replicas("work") >= 3, query, 60, "a scale-up")
        wait_for(lambda: work.stats().committed >= n, query, 120, "the backlog to drain")
        wait_for(lambda: control.replicas("work") == 0, query, 60, "scale to zero")
        batches_at_zero = len(control.batches("work"))
        time.sleep(1.0)
        assert len(control.batches("work")) == batches_at_zero  # idle at zero: no micro-batches
        work.append([b"late"], ["late-1"])
        woke = time.monotonic()
        wait_for(lambda: work.stats().committed >= n + 1, query, 30, "the woken vertex")
        wake_seconds = time.monotonic() - woke
    finally:
        controller.stop()
        query.stop()

    tasks = [b.tasks for b in control.batches("work")]
    assert max(tasks) >= 3, tasks  # more replicas really ran more tasks
    ids = [i for _, i, _ in out.read(0, n + 10)]
    assert len(ids) == len(set(ids)) == n + 1  # exactly once
    logged = list(events.read())
    rules = [d.rule for d in logged if d.vertex == "work"]
    assert Rule.SCALE_UP in rules and Rule.SCALE_TO_ZERO in rules and rules[-1] == Rule.WAKE_ON_PENDING
    assert wake_seconds < 10, wake_seconds
