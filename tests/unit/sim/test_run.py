"""Whole simulations: determinism, the oracle by hand, conservation under every policy, and
the real controller at work."""

from __future__ import annotations

import pytest

from tidal.scaling import Rule
from tidal.sim import POLICIES, Trace, VertexModel, make_trace, oracle, reference_pipeline, score, simulate
from tidal.sim.scores import weighted_quantile
from tidal.spec import Pipeline

SPEC = reference_pipeline()


def two_vertices() -> object:
    return Pipeline("two").source("in", generator={"rate": 1}).sink("out", "blackhole").build()


def test_the_oracle_on_a_step_worked_by_hand() -> None:
    # 100/s for 3 s, then 200/s for 2 s; 50/s per replica → 2, 2, 2, 4, 4 replicas.
    trace = Trace("hand", (100.0, 100.0, 100.0, 200.0, 200.0))
    models = {"in": VertexModel(50, 0, batch_seconds=0), "out": VertexModel(300, 0, batch_seconds=0)}
    got = oracle(two_vertices(), models, trace.rates)
    assert got == {"in": [2, 2, 2, 4, 4], "out": [1, 1, 1, 1, 1]}


def test_the_oracle_is_zero_when_idle_and_capped_by_max() -> None:
    spec = (
        Pipeline("cap")
        .source("in", generator={"rate": 1}, scale={"max": 3})
        .sink("out", "blackhole", scale={"min": 1})
        .build()
    )
    models = {"in": VertexModel(10, 0, batch_seconds=0), "out": VertexModel(1000, 0, batch_seconds=0)}
    assert oracle(spec, models, (0.0, 25.0, 1000.0)) == {"in": [0, 3, 3], "out": [1, 1, 1]}


def test_static_peak_costs_what_the_hand_computation_says() -> None:
    trace = Trace("hand", (100.0,) * 10 + (200.0,) * 10)
    models = {"in": VertexModel(50, 0, batch_seconds=0), "out": VertexModel(300, 0, batch_seconds=0)}
    s = score(simulate(two_vertices(), trace, "static-peak", models))
    assert s.replica_seconds == 20 * 4 + 20 * 1  # peak 200/s: 4 of "in", 1 of "out", 20 s
    assert s.oracle_replica_seconds == 10 * 2 + 10 * 4 + 20 * 1
    assert s.cost == pytest.approx(100 / 80)
    assert s.actions == 0 and s.behind == 0.0
    assert s.p99_delay == 1.0  # every message leaves in the second it arrived
    assert s.delivered == s.arrived == 3000


@pytest.mark.parametrize("policy", POLICIES)
def test_same_seed_same_result(policy: str) -> None:
    trace = make_trace("bursty", seed=5)
    a, b = simulate(SPEC, trace, policy), simulate(SPEC, trace, policy)
    assert a.replicas == b.replicas and a.pending == b.pending
    assert [(d.at, d.vertex, d.desired) for d in a.changes] == [
        (d.at, d.vertex, d.desired) for d in b.changes
    ]
    assert score(a) == score(b)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("trace", ["spike", "idle"])
def test_nothing_is_lost_under_any_policy(policy: str, trace: str) -> None:
    result = simulate(SPEC, make_trace(trace), policy)
    arrived, delivered, in_flight = result.conservation["out"]
    assert arrived == result.trace.total == delivered + in_flight
    assert sum(result.delivered) == delivered


def test_numaflow_decisions_come_from_the_real_scaling_code() -> None:
    result = simulate(SPEC, make_trace("idle"), "numaflow")
    rules = {d.rule for d in result.changes}
    assert {Rule.SCALE_UP, Rule.SCALE_TO_ZERO, Rule.WAKE_ON_PENDING, Rule.WAKE_ON_PATH} <= rules
    woken = next(d for d in result.changes if d.rule == Rule.WAKE_ON_PENDING)
    assert "at 0 replicas: wake to 1 now" in woken.reason


def test_cold_start_is_measured_through_the_whole_path() -> None:
    # After an idle spell the UDF and the sink are at zero and each starts in 8 s (the source may
    # be up, peeking, when the load returns). Woken one after the other (as messages reach each
    # buffer), a cold start takes at least 2 × 8 s.
    one_by_one = score(simulate(SPEC, make_trace("idle"), "numaflow", wake_path=False))
    assert one_by_one.cold_start is not None and 16 <= one_by_one.cold_start <= 40
    # Woken together (the path wake-up), the start-ups overlap: one start-up and a tick or two.
    together = score(simulate(SPEC, make_trace("idle"), "numaflow"))
    assert together.cold_start is not None and 8 <= together.cold_start <= 12
    assert together.cold_start < one_by_one.cold_start
    static = score(simulate(SPEC, make_trace("idle"), "static-peak"))
    assert static.cold_start is None  # never at zero


def test_the_path_wakes_in_one_tick_with_its_reasons() -> None:
    result = simulate(SPEC, make_trace("idle"), "numaflow")
    first = next(d.at for d in result.changes if d.vertex == "in" and d.rule == Rule.WAKE_ON_PENDING)
    woke = {d.vertex: d for d in result.changes if d.at == first}
    assert "reported by the source at 0 replicas" in woke["in"].reason
    for name in ("work", "out"):
        assert woke[name].rule == Rule.WAKE_ON_PATH
        assert woke[name].reason == "upstream 'in' woke: wake to 1 now, ahead of its messages"


def test_a_faster_start_up_shortens_the_cold_start() -> None:
    slow = score(simulate(SPEC, make_trace("idle"), "kpa"))
    models = {n: VertexModel(m, 1.0) for n, m in {"in": 4000, "work": 250, "out": 4000}.items()}
    fast = score(simulate(SPEC, make_trace("idle"), "kpa", models))
    assert fast.cold_start is not None and slow.cold_start is not None
    assert fast.cold_start < slow.cold_start


def test_a_policy_that_reacts_sooner_scores_a_sooner_first_scale_up() -> None:
    kpa = score(simulate(SPEC, make_trace("step-x10"), "kpa"))
    static = score(simulate(SPEC, make_trace("step-x10"), "static-peak"))
    assert kpa.first_scale_up is not None and kpa.first_scale_up <= 5
    assert static.first_scale_up is None  # it never scales
    assert static.behind == 0 and static.cost > 1


def test_unknown_policy_names_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown policy 'hpa': choose one of tidal, numaflow, kpa"):
        simulate(SPEC, make_trace("spike"), "hpa")


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ({}, 0.99, 0.0),
        ({1.0: 99, 50.0: 1}, 0.99, 1.0),
        ({1.0: 98, 50.0: 2}, 0.99, 50.0),
        ({3.0: 1}, 0.5, 3.0),
    ],
)
def test_weighted_quantile(values: dict[float, int], q: float, expected: float) -> None:
    assert weighted_quantile(values, q) == expected
