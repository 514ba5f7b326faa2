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
from tidal.spark.batch.config import QueryConfig
from tidal.spark.query.vertex import start_vertex
from tidal.spec import Pipeline

from .waits import wait_for

pytestmark = pytest.mark.spark

SCALE = {
    "lookbackSeconds": 4,
    "scaleUpCooldownSeconds": 2,
    "scaleDownCooldownSeconds": 2,
    "targetProcessingSeconds": 1,
    "max": 4,
}


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
        wait_for(lambda: control.replicas("work") >= 3, 120, "a scale-up", query=query)
        wait_for(lambda: work.stats().committed >= n, 240, "the backlog to drain", query=query)
        wait_for(lambda: control.replicas("work") == 0, 120, "scale to zero", query=query)
        batches_at_zero = len(control.batches("work"))
        time.sleep(1.0)
        assert len(control.batches("work")) == batches_at_zero  # idle at zero: no micro-batches
        work.append([b"late"], ["late-1"])
        woke = time.monotonic()
        # Polled as often as before: the wake's measured time includes the poll.
        wait_for(lambda: work.stats().committed >= n + 1, 60, "the woken vertex", query=query, poll=0.1)
        wake_seconds = time.monotonic() - woke
    finally:
        controller.stop()
        query.stop()

    tasks = [b.tasks for b in control.batches("work")]
    assert max(tasks) >= 3, tasks  # more replicas really ran more tasks
    ids = [i for _, i, _ in out.read(0, n + 10)]
    assert len(ids) == len(set(ids)) == n + 1  # exactly once
    logged = [d for d in events.read() if d.vertex == "work"]
    rules = [d.rule for d in logged]
    assert Rule.SCALE_UP in rules and Rule.SCALE_TO_ZERO in rules
    # The wake is the last decision that moved the vertex. Not always the last line: a tick after
    # it logs a hold at 1 (its cooldown), and a slow box takes more than a tick to process the
    # late message and stop the controller.
    last = max(i for i, d in enumerate(logged) if d.changed)
    assert logged[last].rule == Rule.WAKE_ON_PENDING, logged[last:]
    assert all(d.current == d.desired == 1 for d in logged[last + 1 :]), logged[last:]
    assert wake_seconds < 10, wake_seconds
