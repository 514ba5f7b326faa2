"""The controller on real SQLite buffers and a real control store, with simulated seconds.

A "vertex" here is a consumer loop that does what a vertex's Spark query does each second:
read up to ``replicas × rate`` messages, commit them, and record the batch in the control store.
The controller sees the buffers and the control store exactly as it does when Spark drives them.
"""

from __future__ import annotations

import itertools
import logging

import pytest

from tidal.controller import Controller, EventLog, StoreProbe
from tidal.isb.base import BufferLimits
from tidal.isb.control import ControlStore
from tidal.isb.sqlite import SqliteStore
from tidal.scaling import Rule
from tidal.spec import Pipeline

from .waits import eventually

FAST = {
    "lookbackSeconds": 10,
    "scaleUpCooldownSeconds": 5,
    "scaleDownCooldownSeconds": 5,
    "targetProcessingSeconds": 3,
    "max": 8,
}


class Rig:
    def __init__(self, tmp_path, spec, source_pending=None):
        self.spec = spec
        self.db = tmp_path / "pipeline.db"
        self.store = SqliteStore(self.db)
        limits = BufferLimits(spec.limits.buffer_max_length, spec.limits.buffer_usage_limit)
        for v in spec.vertices:
            if v.kind != "source":
                self.store.create(v.name, limits)
        self.control = ControlStore(self.db)
        self.events = EventLog(tmp_path / "events.jsonl")
        probe = StoreProbe(spec, self.store, self.control, source_pending)
        self.controller = Controller(spec, probe, self.control, self.events)
        self.batch = 0
        self.seq = 0

    def append(self, buffer: str, n: int) -> None:
        for start in range(0, n, 1000):
            k = min(1000, n - start)
            ids = [f"m{self.seq + i}" for i in range(k)]
            self.seq += k
            self.store.open(buffer).append([b"x"] * k, ids)

    def process(self, vertex: str, per_replica: int, downstream: str | None = None) -> int:
        """One second of a vertex: take up to replicas × per_replica messages, commit them."""
        replicas = self.control.replicas(vertex, default=self.spec.vertex(vertex).replicas)
        buf = self.store.open(vertex)
        got = buf.read(buf.committed(), replicas * per_replica) if replicas else []
        if got:
            if downstream:
                self.store.open(downstream).append(
                    [p for _, _, p in got], [f"{vertex}:{i}" for _, i, _ in got]
                )
            buf.commit(got[-1][0])
            self.batch += 1
            self.control.record_batch(vertex, self.batch, replicas, len(got))
        return len(got)

    def replicas(self, vertex: str) -> int:
        return self.control.replicas(vertex, default=self.spec.vertex(vertex).replicas)


def work_pipeline(**scale):
    return (
        Pipeline("t", limits={"bufferMaxLength": 100_000})
        .source("in", generator={"rate": 0})
        .map("work", "tidal.examples.udfs:upper", scale={**FAST, **scale})
        .sink("out", "blackhole")
        .build()
    )


def test_backlog_scales_up_drains_goes_to_zero_and_wakes_on_the_next_message(tmp_path):
    rig = Rig(tmp_path, work_pipeline())
    rig.append("work", 20_000)
    history = []
    t = 1000.0
    for _ in range(120):
        t += 1
        rig.process("work", per_replica=300)
        rig.controller.tick(t)
        history.append((rig.replicas("work"), rig.store.open("work").pending()))
    counts = [r for r, _ in history]
    assert max(counts) >= 4, counts  # scaled up on the backlog
    peak_at = counts.index(max(counts))
    assert all(b >= a for a, b in itertools.pairwise(counts[: peak_at + 1]))  # only up first
    assert history[-1] == (0, 0)  # drained, then scaled to zero
    rig.append("work", 5)
    t += 1
    decisions = {d.vertex: d for d in rig.controller.tick(t)}
    assert decisions["work"].rule == Rule.WAKE_ON_PENDING
    assert rig.replicas("work") == 1  # woken within one tick, cooldown or not
    assert rig.process("work", per_replica=300) == 5

    logged = [d for d in rig.events.read() if d.vertex == "work"]
    ups = [d for d in logged if d.rule == Rule.SCALE_UP]
    assert ups and "pending" in ups[0].reason and "/s over" in ups[0].reason
    assert ups[0].inputs["model"] in ("time", "buffer")
    assert any(d.rule == Rule.SCALE_TO_ZERO for d in logged)
    assert logged[-1].rule == Rule.WAKE_ON_PENDING


def test_steady_holds_are_logged_once(tmp_path):
    rig = Rig(tmp_path, work_pipeline(min=1, max=1))
    for t in range(10):
        rig.controller.tick(1000.0 + t)
    fixed = [d for d in rig.events.read() if d.vertex == "work"]
    # Never scaled, so no cooldown holds the first decision (Numaflow's empty lastScaledAt);
    # the same hold is logged once, not once per tick.
    assert [d.rule for d in fixed] == [Rule.FIXED]


def test_direct_back_pressure_takes_a_replica_away(tmp_path):
    spec = (
        Pipeline("t", limits={"bufferMaxLength": 10_000, "bufferUsageLimit": 0.8})
        .source("in", generator={"rate": 0})
        .map("a", "tidal.examples.udfs:upper", scale=FAST, replicas=3)
        .map("b", "tidal.examples.udfs:upper", scale=FAST, replicas=1)
        .sink("out", "blackhole")
        .build()
    )
    rig = Rig(tmp_path, spec)
    rig.append("a", 9_000)
    rig.append("b", 7_500)  # 94 % of the usable 8000: over the 90 % threshold
    t = 1000.0
    seen = []
    for _ in range(15):
        t += 1
        rig.process("a", per_replica=50)  # a trickle: "a" wants more replicas
        decisions = {d.vertex: d for d in rig.controller.tick(t)}
        seen.append(decisions["a"])
    pressured = [d for d in seen if d.rule == Rule.BACK_PRESSURE_DIRECT]
    assert pressured, [d.explain() for d in seen]
    assert pressured[0].desired == pressured[0].current - 1
    assert "buffer 'b'" in pressured[0].reason
    assert pressured[0].inputs["pressureBuffer"] == "b"


def test_source_pending_rules(tmp_path, caplog):
    reports = {"value": 60_000.0}

    def pending():
        value = reports["value"]
        if value == "raise":
            raise ConnectionError("broker down")
        return value

    spec = Pipeline("t").source("in", generator={"rate": 0}, scale=FAST).sink("out", "blackhole").build()
    rig = Rig(tmp_path, spec, source_pending={"in": pending})
    t = 1000.0
    processed = 0
    for _ in range(15):  # a real pending and a real rate: the source is scaled
        t += 1
        processed += 1000
        rig.control.record_batch("in", int(t), 1, 1000)
        rig.controller.tick(t)
    assert rig.replicas("in") > 1

    # Negative: not available. Unavailable samples are dropped from the average (Numaflow's
    # rater), so once the lookback (10 s) holds no available sample, the source is left alone.
    reports["value"] = -1.0
    for _ in range(11):
        t += 1
        rig.controller.tick(t)
    before = rig.replicas("in")
    for _ in range(5):
        t += 1
        last = {d.vertex: d for d in rig.controller.tick(t)}["in"]
        assert last.rule == Rule.METRICS_UNAVAILABLE, last.explain()
    assert rig.replicas("in") == before

    reports["value"] = "raise"  # raising: logged, not available, the loop keeps going
    with caplog.at_level(logging.WARNING, logger="tidal.controller"):
        for _ in range(12):
            t += 1
            last = {d.vertex: d for d in rig.controller.tick(t)}["in"]
    assert last.rule == Rule.METRICS_UNAVAILABLE
    assert "pending() raised ConnectionError: broker down" in caplog.text
    assert {d.vertex for d in rig.controller.tick(t + 1)} == {"in", "out"}


def test_run_ticks_on_the_wall_clock_until_stopped(tmp_path):
    spec = (
        Pipeline("t", controller={"intervalSeconds": 0.05})
        .source("in", generator={"rate": 0})
        .sink("out", "blackhole", scale={"min": 0, "max": 2})
        .build()
    )
    rig = Rig(tmp_path, spec)

    def decided() -> None:
        assert rig.controller.decisions()["out"] is not None

    rig.controller.start()
    try:  # a deadline, not a measure: on a busy box the controller's thread may tick late
        eventually(decided, 60, "the first tick on the wall clock", poll=0.02)
    finally:
        rig.controller.stop()
    decided()


@pytest.fixture(autouse=True)
def _quiet_controller_logs(caplog):
    caplog.set_level(logging.INFO, logger="tidal.controller")


def test_a_full_join_buffer_takes_a_replica_from_every_upstream(tmp_path):
    # Two branches into one vertex (Numaflow's diamond): the join's buffer is the direct
    # downstream of both, and each one's decision says so, not only the first edge's.
    spec = (
        Pipeline("t", limits={"bufferMaxLength": 10_000, "bufferUsageLimit": 0.8})
        .source("in", generator={"rate": 0})
        .map("left", "tidal.examples.udfs:upper", scale=FAST, replicas=3)
        .map("right", "tidal.examples.udfs:upper", scale=FAST, replicas=3)
        .map("join", "tidal.examples.udfs:upper", scale=FAST, replicas=1)
        .sink("out", "blackhole")
        .edge("in", "left")
        .edge("in", "right")
        .edge("left", "join")
        .edge("right", "join")
        .edge("join", "out")
        .build()
    )
    rig = Rig(tmp_path, spec)
    rig.append("left", 9_000)
    rig.append("right", 9_000)
    rig.append("join", 7_500)  # 94 % of the usable 8000: over the 90 % threshold
    t = 1000.0
    for _ in range(15):
        t += 1
        for branch in ("left", "right"):
            rig.process(branch, per_replica=50)  # a trickle: each branch wants more replicas
        rig.controller.tick(t)
    logged = list(rig.events.read())
    for branch in ("left", "right"):
        pressured = [d for d in logged if d.vertex == branch and d.rule == Rule.BACK_PRESSURE_DIRECT]
        assert pressured, [d.explain() for d in logged if d.vertex == branch]
        first = pressured[0]
        assert first.desired == first.current - 1 and first.recommended > first.current
        assert first.inputs["pressureBuffer"] == "join" and "buffer 'join'" in first.reason
        assert not [d for d in logged if d.vertex == branch and d.rule == Rule.SCALE_UP]
