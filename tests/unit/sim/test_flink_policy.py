"""``policy: flink`` (:mod:`tidal.controller.flink`): Flink's job-wide rules on hand-worked
inputs, the simulator settling a ×4 step with it, and the spec choosing it."""

from __future__ import annotations

import pickle

import pytest

from tidal.controller.choose import flink_policies, spec_policies
from tidal.controller.flink import FlinkJob, FlinkPolicy
from tidal.scaling import Decision, Rule, VertexKind
from tidal.scaling.flink import FlinkOptions
from tidal.sim import reference_pipeline, simulate
from tidal.sim.traces import Trace
from tidal.spec import parse_pipeline

from .views import view

# Short windows for hand-worked cases: 10 s stabilization, a 20 s window, no restart term.
# Scale-downs are not delayed (scale-down.interval 0) unless a test says so.
OPTIONS = FlinkOptions(
    stabilization_interval=10, metrics_window=20, restart_time=0, catch_up_duration=100, scale_down_interval=0
)


def run(policy: FlinkPolicy, name: str, until: float, replicas: int, rate: float, busy_share: float):
    """Ticks every 5 s from 0 to ``until`` at ``rate``/s with each replica busy ``busy_share``."""
    d = None
    for t in range(0, int(until) + 1, 5):
        d = policy.decide(view(name, t, replicas, rate * t, 0, busy_share * replicas * t))
    assert d is not None
    return d


def test_it_stabilizes_then_collects_a_full_window_before_deciding() -> None:
    job = FlinkJob(OPTIONS)
    p = FlinkPolicy("work", job, max_replicas=50)
    d = p.decide(view("work", 0, 2, 0, 0, 0))
    assert d.rule == Rule.FLINK_HOLD and "stabilizing" in d.reason
    d = run(p, "work", 25, 2, 100, 0.5)
    assert d.rule == Rule.FLINK_HOLD and "collecting metrics: 15 s of a 20 s window" in d.reason
    d = run(p, "work", 30, 2, 100, 0.5)
    # 100/s over 2 replicas busy half the time: true rate 200/s; 100/0.7 + 0 lag → capacity 143/s
    assert d.inputs["trueProcessingRate"] == 200
    assert d.inputs["targetCapacity"] == 143
    assert (d.desired, d.rule) == (2, Rule.FLINK_HOLD)  # ×0.71 rounds back up to 2: nothing to do


def test_a_saturated_vertex_scales_for_target_utilization() -> None:
    job = FlinkJob(OPTIONS)
    p = FlinkPolicy("in", job, max_replicas=50)
    d = None
    for t in range(0, 31, 5):  # 300/s arrive, 2 replicas always busy read 200/s
        d = p.decide(view("in", t, 2, 200 * t, 100 * t, 2 * t, kind=VertexKind.SOURCE))
    assert d is not None and d.changed and d.rule == Rule.FLINK_RESCALE
    # target 300/s / 0.7 + lag 3000/100 s = 459/s at a true 200/s: ×2.3 → 5
    assert d.inputs["targetDataRate"] == 300 and d.inputs["catchUpDataRate"] == 30
    assert d.desired == 5 and d.inputs["outsideUtilizationBound"] is True
    assert job.rescaled_at == 30
    # the job restarted: stabilizing again
    assert "stabilizing" in p.decide(view("in", 35, 5, 200 * 35, 0, 70)).reason


def test_a_change_within_bounds_waits_for_a_vertex_outside_them() -> None:
    """Flink rescales only when some vertex is outside its utilisation bounds; then every vertex
    with a change moves with it (here: the one asked first, on its next tick)."""
    job = FlinkJob(OPTIONS, {"a": (), "b": ()})
    a = FlinkPolicy("a", job, max_replicas=50)
    b = FlinkPolicy("b", job, max_replicas=50)
    # a: 10 replicas at utilisation 0.5 (true 200/s, 100/s in): within [0.4, 1.0] but wants 8
    # b: 2 replicas busy all the time at 100/s while 150/s arrive: outside, wants 5
    da = db = None
    for t in range(0, 31, 5):
        da = a.decide(view("a", t, 10, 100 * t, 0, 5 * t))
        db = b.decide(view("b", t, 2, 100 * t, 50 * t, 2 * t))
    assert da is not None and db is not None
    assert da.rule == Rule.FLINK_HOLD and "waits for a vertex outside its bounds" in da.reason
    assert db.changed and db.desired == 5 and db.inputs["outsideUtilizationBound"] is True
    da = a.decide(view("a", 35, 10, 100 * 35, 0, 5 * 35))
    assert da.changed and da.desired == 8 and "with the job's rescale at 30 s" in da.reason


def test_within_bounds_alone_never_rescales() -> None:
    job = FlinkJob(OPTIONS, {"a": ()})
    a = FlinkPolicy("a", job, max_replicas=50)
    d = run(a, "a", 60, 10, 100, 0.5)
    assert not d.changed and a.carried is not None


def test_downstream_takes_its_inputs_target_rate() -> None:
    """A vertex downstream is sized for what its source should sustain, not for what a still too
    small source passes on: Flink sizes the graph in one step."""
    job = FlinkJob(OPTIONS, {"in": (), "work": ("in",)})
    src, work = FlinkPolicy("in", job, max_replicas=50), FlinkPolicy("work", job, max_replicas=50)
    dw = None
    for t in range(0, 31, 5):  # 400/s arrive, the source passes 200/s on
        src.decide(view("in", t, 2, 200 * t, 200 * t, 2 * t, kind=VertexKind.SOURCE))
        dw = work.decide(view("work", t, 1, 200 * t, 0, 0.5 * t))
    assert dw is not None
    assert dw.inputs["targetDataRate"] == 400  # the source's 400/s × output ratio 1
    assert dw.inputs["catchUpDataRate"] == 60  # the source's lag, 6000 over 100 s
    # 400/0.7 + 60 = 631/s at a true 400/s: ×1.58 → 2, with the source's rescale in the same tick
    assert dw.changed and dw.desired == 2 and job.rescaled_at == 30


def test_restart_time_is_tracked_from_readiness() -> None:
    job = FlinkJob(OPTIONS)
    p = FlinkPolicy("in", job, max_replicas=50)
    for t in range(0, 31, 5):
        p.decide(view("in", t, 2, 200 * t, 100 * t, 2 * t, kind=VertexKind.SOURCE))
    assert job.restart_time() == 0  # the option, until one is tracked
    p.decide(view("in", 35, 5, 200 * 35, 0, 70, kind=VertexKind.SOURCE, ready=2))
    p.decide(view("in", 45, 5, 200 * 45, 0, 90, kind=VertexKind.SOURCE, ready=5))
    assert job.restart_time() == 15


def test_the_job_is_not_saved_with_a_policy() -> None:
    """The driver's saved state pickles a policy's attributes one by one; the shared job must
    stay the new controller's (its links to the other vertices' policies)."""
    job = FlinkJob(OPTIONS)
    p = FlinkPolicy("a", job, max_replicas=5)
    with pytest.raises(TypeError):
        pickle.dumps(p.job)
    assert pickle.loads(pickle.dumps(p.delayed)) is not None


def test_the_simulator_settles_a_x4_step_with_policy_flink() -> None:
    spec = reference_pipeline()
    rates = tuple(250.0 if t < 300 else 1000.0 for t in range(1200))
    result = simulate(spec, Trace("step-x4", rates, (300.0,), 0, "250/s, then 1000/s"), "flink")
    work = result.replicas["work"]
    need = result.oracle["work"][-1]
    assert need == 5
    assert all(d.rule == Rule.FLINK_RESCALE for d in result.changes)
    settled = next(t for t in range(300, 1200) if all(r == work[-1] for r in work[t:]))
    assert work[-1] == need and settled < 600  # within a stabilization + window of the step
    assert result.pending["work"][-1] == 0 and result.pending["in"][-1] == 0
    ups = [d for d in result.changes if d.vertex == "work"]
    assert all(d.desired > d.current for d in ups)  # no flapping on a step


def test_policy_flink_in_the_spec_per_vertex_or_pipeline() -> None:
    data = {
        "name": "p",
        "policy": "numaflow",  # the controller's own rules: no policy object for the others
        "vertices": [
            {"name": "in", "source": {"generator": {}}},
            {
                "name": "work",
                "udf": {"map": "tidal.examples.udfs:upper"},
                "policy": "flink",
                "scale": {"max": 6},
            },
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "out"}],
    }
    spec = parse_pipeline(data)
    assert spec.policy_of("work") == "flink" and spec.policy_of("in") == "numaflow"
    chosen = spec_policies(spec, 0.0, lambda _: 1)
    assert list(chosen) == ["work"] and isinstance(chosen["work"], FlinkPolicy)
    assert chosen["work"].options.vertex_max_parallelism == 6
    whole = parse_pipeline({**data, "policy": "flink"})
    policies = spec_policies(whole, 0.0, lambda _: 1)
    assert sorted(policies) == ["in", "out", "work"]
    jobs = {id(p.job) for p in policies.values() if isinstance(p, FlinkPolicy)}
    assert len(jobs) == 1  # one job: rates flow down and rescales are job-wide
    assert flink_policies(whole)["work"].job.inputs["work"] == ("in",)


def source_reading_a_third(job: FlinkJob) -> Decision:
    """300/s arrive at a source that reads 100/s busy a tenth of the time: its busy time says
    1000/s, what it reads while catching up says 100/s (work outside its measured tasks)."""
    p = FlinkPolicy("in", job, max_replicas=50)
    d = None
    for t in range(0, 31, 5):
        d = p.decide(view("in", t, 1, 100 * t, 200 * t, 0.1 * t, kind=VertexKind.SOURCE))
    assert d is not None
    return d


def test_a_source_catching_up_is_sized_on_its_observed_rate() -> None:
    d = source_reading_a_third(FlinkJob(OPTIONS))
    assert d.inputs["trueProcessingRateFrom"] == "observed" and d.inputs["trueProcessingRate"] == 100
    # 300/0.7 + 6000/100 s = 489/s at 100/s → 5
    assert d.changed and d.desired == 5


def test_no_observed_rate_while_a_buffer_it_writes_to_is_full() -> None:
    """Held back by a full buffer, what a source reads is not what it can do (Flink's observed
    rate divides by the time not back-pressured): busy time decides."""
    job = FlinkJob(OPTIONS, {"in": (), "work": ("in",)})
    job.full["work"] = True
    d = source_reading_a_third(job)
    assert d.inputs["trueProcessingRateFrom"] == "busy time" and not d.changed
