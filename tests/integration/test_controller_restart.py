"""A restarted driver's controller resumes from what the killed one saved (tidal.controller.restart):
its decisions from the first tick are the ones the uninterrupted controller makes, a damaged
snapshot restarts it with defaults and says so, and a metric outage holds every vertex.

Real SQLite buffers and control store, simulated seconds (the rig of ``test_controller``). The
"uninterrupted" controller keeps ticking on the same store; the "restarted" one is built afresh
on the same store, restored from the snapshot the first took, and ticks beside it with a dry-run
actuator: where both decide, they must decide the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from tidal.controller import Controller, EventLog, StoreProbe
from tidal.controller.replicas import DryRunActuator
from tidal.controller.restart import FORMAT, StateFile
from tidal.scaling import Rule
from tidal.spec import parse_pipeline

from .test_controller import FAST, Rig, work_pipeline


def _twin(rig: Rig, tmp_path, name: str, probe=None) -> tuple[Controller, EventLog]:
    """A new controller on the rig's store, as a restarted driver builds one."""
    events = EventLog(tmp_path / f"{name}.jsonl")
    probe = probe or StoreProbe(rig.spec, rig.store, rig.control)
    return Controller(rig.spec, probe, DryRunActuator(), events), events


def _drive(rig: Rig, t: float, ticks: int, work: int = 300) -> float:
    for _ in range(ticks):
        t += 1
        rig.process("work", per_replica=work)
        rig.controller.tick(t)
    return t


def test_a_restored_controller_decides_as_the_uninterrupted_one_from_its_first_tick(tmp_path):
    rig = Rig(tmp_path, work_pipeline())
    rig.append("work", 40_000)
    t = _drive(rig, 1000.0, 12)  # scaled up at least once, and within a cooldown of it
    assert rig.replicas("work") > 1
    saved = StateFile(tmp_path / "controller.state")
    saved.save(rig.controller.snapshot())

    restored, events = _twin(rig, tmp_path, "restored")
    done = restored.restore(saved.load() or b"", t)
    assert not done.ignored and set(done.restored) == {"in", "work", "out"}
    cold, _ = _twin(rig, tmp_path, "cold")  # the same restart without the snapshot
    same = differ = 0
    for _ in range(40):
        t += 1
        rig.process("work", per_replica=300)
        # The dry-run twins first: they see the sample the uninterrupted controller sees.
        got = {d.vertex: d for d in restored.tick(t)}
        blind = {d.vertex: d for d in cold.tick(t)}
        expected = {d.vertex: d for d in rig.controller.tick(t)}
        for vertex, d in expected.items():
            assert (got[vertex].rule, got[vertex].desired) == (d.rule, d.desired), (
                f"t={t}: {got[vertex].explain()} != {d.explain()}"
            )
            same += 1
            differ += (blind[vertex].rule, blind[vertex].desired) != (d.rule, d.desired)
    assert same == 120
    assert differ > 0  # without the snapshot the decisions are not the same: the test can tell
    notes = [d for d in events.read() if d.rule == Rule.STATE_RESTORED]
    assert {d.vertex for d in notes} == {"in", "work", "out"}
    assert "resumed from the state saved at" in notes[0].reason


def test_a_restart_keeps_the_cooldown_and_never_takes_a_backlogged_vertex_to_zero(tmp_path):
    rig = Rig(tmp_path, work_pipeline(min=0))
    rig.append("work", 40_000)
    t = _drive(rig, 1000.0, 12)
    before = rig.replicas("work")
    restored, _ = _twin(rig, tmp_path, "restored")
    restored.restore(rig.controller.snapshot(), t)
    first = {d.vertex: d for d in restored.tick(t + 1)}["work"]
    assert first.rule != Rule.SCALE_TO_ZERO and first.desired >= 1
    assert first.current == before  # no cold start to min: the count the run had
    if first.rule in (Rule.SCALE_UP_COOLDOWN, Rule.COOLDOWN, Rule.SCALE_DOWN_COOLDOWN):
        assert first.desired == before  # the killed driver's last scaling still holds the count


def test_after_a_restart_a_scale_down_waits_one_lookback_and_a_scale_up_does_not(tmp_path):
    """A restarted driver decides from its first tick, before Spark's warm-up is over
    (``Controller.resumed``): its window has the restart's hole, so for one lookback (10 s here) a
    scale-down is held and says why, while the backlog still scales up at once."""
    rig = Rig(tmp_path, work_pipeline(min=0))
    rig.append("work", 30_000)
    t = _drive(rig, 1000.0, 15)
    rig.process("work", per_replica=100_000)  # drained: the controller starts scaling down
    t = _drive(rig, t, 12, work=0)
    held = rig.replicas("work")
    assert held > 0
    restored, events = _twin(rig, tmp_path, "restored")
    restored.actuator = rig.control  # it runs the pipeline now
    restored.restore(rig.controller.snapshot(), t)
    assert restored.resumed
    for _ in range(9):
        t += 1
        restored.tick(t)
        assert rig.replicas("work") == held, restored.decisions()["work"]
    settling = [d for d in events.read() if d.vertex == "work" and d.rule == Rule.METRICS_SETTLING]
    assert settling and "the driver's restart" in settling[0].reason
    for _ in range(30):
        t += 1
        restored.tick(t)
    assert rig.replicas("work") < held  # past the lookback: the idle vertex goes down

    rig.append("work", 60_000)  # a burst right after another restart: no hold on the way up
    again, _ = _twin(rig, tmp_path, "again")
    again.actuator = rig.control
    again.restore(restored.snapshot(), t)
    before = rig.replicas("work")
    for _ in range(3):
        t += 1
        again.tick(t)
    assert rig.replicas("work") > before, again.decisions()["work"]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda b: b[: len(b) // 2], "truncated"),
        (lambda b: b"tidal-controller-state 0\n" + b[len(FORMAT) :], "another version"),
        (lambda b: b"", "empty"),
        (lambda b: FORMAT + b"\x80\x05not a pickle", "a half-written record"),
    ],
)
def test_a_damaged_snapshot_restarts_with_defaults_and_an_event_saying_why(tmp_path, damage, why):
    rig = Rig(tmp_path, work_pipeline())
    rig.append("work", 10_000)
    t = _drive(rig, 1000.0, 8)
    restored, events = _twin(rig, tmp_path, "restored")
    done = restored.restore(damage(rig.controller.snapshot()), t)
    assert done.ignored and not done.restored, why
    notes = [d for d in events.read() if d.rule == Rule.STATE_IGNORED]
    assert {d.vertex for d in notes} == {"in", "work", "out"}
    assert "saved state was ignored" in notes[0].reason
    decisions = restored.tick(t + 1)  # and it decides as a new controller does
    assert {d.vertex for d in decisions} == {"in", "work", "out"}
    assert rig.store.open("work").pending() > 0  # no message depends on the snapshot


def test_a_changed_scale_block_keeps_the_windows_and_starts_the_policy_fresh(tmp_path):
    rig = Rig(tmp_path, work_pipeline())
    rig.append("work", 10_000)
    t = _drive(rig, 1000.0, 8)
    data = rig.controller.snapshot()
    spec = work_pipeline(max=3)
    probe = StoreProbe(spec, rig.store, rig.control)
    events = EventLog(tmp_path / "changed.jsonl")
    changed = Controller(spec, probe, DryRunActuator(), events)
    done = changed.restore(data, t)
    assert "policy starts fresh" in done.fresh["work"] and "work" in done.restored
    assert "in" in done.restored and "in" not in done.fresh


class _Outage(StoreProbe):
    """The store's probe, whose reads of one vertex fail while ``down`` (its buffer unreachable)."""

    def __init__(self, *args, vertex: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.vertex, self.down = vertex, False

    def sample(self, vertex):
        if self.down and vertex == self.vertex:
            raise ConnectionError("buffer unreachable")
        return super().sample(vertex)


def test_a_metric_outage_holds_the_vertex_says_so_and_resumes_when_the_numbers_come_back(tmp_path):
    spec = work_pipeline(min=0)
    rig = Rig(tmp_path, spec)
    probe = _Outage(spec, rig.store, rig.control, vertex="work")
    rig.controller = Controller(spec, probe, rig.control, rig.events)
    rig.append("work", 30_000)
    t = _drive(rig, 1000.0, 15)
    held = rig.replicas("work")
    assert held > 1
    probe.down = True
    for _ in range(30):  # 30 s without numbers: the backlog drains, nothing scales on the silence
        t += 1
        rig.process("work", per_replica=2000)
        rig.controller.tick(t)
        last = rig.controller.decisions()["work"]
        assert last is not None and last.rule == Rule.METRICS_UNAVAILABLE
        assert rig.replicas("work") == held
    assert rig.store.open("work").pending() == 0  # idle now: only missing data kept it up
    outage = [d for d in rig.events.read() if d.vertex == "work" and "buffer unreachable" in d.reason]
    assert len(outage) == 1 and outage[0].rule == Rule.METRICS_UNAVAILABLE  # once, not every tick
    probe.down = False
    back = t + 1
    for _ in range(9):  # the lookback (10 s) still spans the hole: a scale-down is held
        t += 1
        rig.controller.tick(t)
        assert rig.replicas("work") == held, rig.controller.decisions()["work"]
    held_downs = [d for d in rig.events.read() if d.vertex == "work" and d.rule == Rule.METRICS_SETTLING]
    assert held_downs and held_downs[0].inputs["numbersBackAt"] == back
    for _ in range(60):
        t += 1
        rig.controller.tick(t)
    assert rig.replicas("work") < held  # back to deciding on numbers: it scales the idle vertex down


def test_the_state_file_is_replaced_whole(tmp_path):
    state = StateFile(tmp_path / "controller.state")
    assert state.load() is None
    state.save(b"one")
    (tmp_path / "controller.state.part").write_bytes(b"half of a write the crash cut")
    assert state.load() == b"one"  # a crash mid-write leaves the previous snapshot
    state.save(b"two")
    assert state.load() == b"two" and not (tmp_path / "controller.state.part").exists()


def _policy_rig(tmp_path, policy: str, backlog: int, **limits: int) -> tuple[Any, Rig, float]:
    """A three-vertex pipeline under ``policy``, its controller driven 20 ticks over ``backlog``
    messages at ``work``: the spec, the rig and the time reached."""
    from tidal.controller.choose import spec_policies

    spec = parse_pipeline(
        {
            "name": "t",
            "policy": policy,
            **({"limits": limits} if limits else {}),
            "vertices": [
                {"name": "in", "source": {"generator": {"rate": 0}}},
                {"name": "work", "udf": {"map": "tidal.examples.udfs:upper"}, "scale": FAST},
                {"name": "out", "sink": {"blackhole": {}}},
            ],
            "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "out"}],
        }
    )
    rig = Rig(tmp_path, spec)
    rig.controller = Controller(
        spec,
        StoreProbe(spec, rig.store, rig.control),
        rig.control,
        rig.events,
        policies=spec_policies(spec, 1000.0, rig.replicas),
    )
    rig.append("work", backlog)
    return spec, rig, _drive(rig, 1000.0, 20)


def test_policy_tidal_resumes_with_what_it_learnt(tmp_path):
    from tidal.controller.choose import spec_policies

    spec, rig, t = _policy_rig(tmp_path, "tidal", 40_000, bufferMaxLength=100_000)
    restored = Controller(
        spec,
        StoreProbe(spec, rig.store, rig.control),
        DryRunActuator(),
        EventLog(tmp_path / "r.jsonl"),
        policies=spec_policies(spec, t, rig.replicas),
    )
    done = restored.restore(rig.controller.snapshot(), t)
    assert "AdaptivePolicy's learnt state" in done.restored["work"]
    for _ in range(20):
        t += 1
        rig.process("work", per_replica=300)
        got = {d.vertex: (d.rule, d.desired) for d in restored.tick(t)}
        assert got == {d.vertex: (d.rule, d.desired) for d in rig.controller.tick(t)}


def test_policy_flink_resumes_in_a_new_job_of_its_own(tmp_path):
    """A Flink vertex's samples pickle, its job (the links to the other vertices' policies) does
    not: the restored vertices share the new controller's job and collect afresh, as Flink's
    operator does when it loses its stored metrics."""
    from tidal.controller.choose import spec_policies
    from tidal.controller.flink import FlinkPolicy

    spec, rig, t = _policy_rig(tmp_path, "flink", 4_000)
    policies = spec_policies(spec, t, rig.replicas)
    restored = Controller(
        spec,
        StoreProbe(spec, rig.store, rig.control),
        DryRunActuator(),
        EventLog(tmp_path / "r.jsonl"),
        policies=policies,
    )
    restored.restore(rig.controller.snapshot(), t)
    jobs = {id(p.job) for p in policies.values() if isinstance(p, FlinkPolicy)}
    assert len(jobs) == 1
    got = {d.vertex: d.rule for d in restored.tick(t + 1)}
    assert got["work"] == Rule.FLINK_HOLD


def test_a_state_file_the_disk_refuses_is_a_warning_once_and_the_last_snapshot_stays(tmp_path, caplog):
    state = StateFile(tmp_path / "controller.state")
    state.save(b"last good")
    (tmp_path / "controller.state.part").mkdir()  # the write beside it fails, as on a full disk
    with caplog.at_level("WARNING", logger="tidal.controller"):
        assert state.keep(b"new") is False
        assert state.keep(b"newer") is False
    assert caplog.text.count("the controller's state was not saved") == 1
    assert state.load() == b"last good"
    (tmp_path / "controller.state.part").rmdir()
    assert state.keep(b"newest") is True and state.load() == b"newest"
