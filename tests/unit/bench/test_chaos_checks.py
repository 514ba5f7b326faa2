"""The chaos bench's assertions (tidal.bench.chaos_checks) on records made by hand: each holds on a
clean record and catches the breach it exists for."""

from __future__ import annotations

from tidal.bench.chaos_checks import (
    Fault,
    exactly_once,
    outage_holds,
    recovery,
    replica_drops_in_scale_ups,
    resumption,
    settled_at,
    slo_shares,
)
from tidal.scaling.latency import DelaySample


def row(at, replicas, pending, name="work"):
    return {"at": at, "name": name, "replicas": replicas, "pending": pending}


def event(at, vertex, current, desired, rule, reason="", **inputs):
    return {"at": at, "vertex": vertex, "current": current, "desired": desired, "rule": rule,
            "reason": reason, "inputs": inputs}  # fmt: skip


def test_exactly_once_names_the_missing_the_doubled_and_the_strangers():
    assert exactly_once(["a", "b", "c"], ["a", "b", "c"]).held
    found = exactly_once(["a", "a", "x"], ["a", "b"])
    assert found.numbers == {"delivered": 1, "missing": 1, "doubled": 1}
    assert len(found.violations) == 3 and "['b']" in found.violations[0]


def test_a_drop_during_a_scale_up_is_a_violation_unless_a_fault_covers_it():
    series = [row(0, 1, 0), row(1, 2, 500), row(2, 3, 800), row(3, 2, 900), row(4, 3, 600), row(5, 3, 0)]
    found = replica_drops_in_scale_ups(series, "work", [])
    assert found.numbers["scale_ups"] == 1 and len(found.violations) == 1 and "3 → 2" in found.violations[0]
    covered = replica_drops_in_scale_ups(series, "work", [Fault("executor", 2.5, "executor 1 killed")])
    assert covered.held and covered.numbers["drops_explained"] == 1
    # A host cut takes several replicas at once: one drop, the replicas it took summed.
    series = [row(0, 2, 0), row(1, 5, 500), row(2, 2, 800), row(3, 4, 900), row(4, 4, 0)]
    cut = replica_drops_in_scale_ups(series, "work", [Fault("receiver host", 1.5, "r2 cut")])
    assert cut.held and cut.numbers["drops_explained"] == 1 and cut.numbers["replicas_explained"] == 3


def test_a_scale_down_after_the_backlog_cleared_is_not_a_drop_in_a_scale_up():
    series = [row(0, 1, 0), row(1, 3, 500), row(2, 3, 100), row(3, 3, 0), row(4, 1, 0)]
    assert replica_drops_in_scale_ups(series, "work", []).held


def test_resumption_wants_a_restored_state_and_a_first_decision_on_numbers():
    restart = Fault("driver", 100.0, "SIGKILL")
    good = [event(90, "work", 1, 3, "scale-up"), event(110, "work", 3, 3, "state-restored"),
            event(125, "work", 3, 4, "scale-up", totalPending=900.0)]  # fmt: skip
    found = resumption(good, [restart], tick=0.5)
    assert found.held and found.numbers["first_decision_after_s"] == [15.0]
    blind = [*good[:2], event(125, "work", 3, 3, "metrics-unavailable", "rate or pending not available")]
    assert "blind" in resumption(blind, [restart], 0.5).violations[0]
    cold = [event(110, "work", 3, 3, "state-ignored", "the controller's saved state was ignored: x")]
    assert not resumption(cold, [restart], 0.5).held
    assert not resumption([], [restart], 0.5).held
    to_zero = [*good[:2], event(125, "work", 3, 0, "scale-to-zero", totalPending=40.0)]
    assert "scaled to zero with 40.0 pending" in resumption(to_zero, [restart], 0.5).violations[0]
    # Blind before the restart too: it had learnt nothing to restore, so resuming blind loses nothing.
    unknown = "no processing measured yet: capacity unknown"
    never_knew = [event(90, "gen", 1, 1, "warming-up", unknown), event(110, "gen", 1, 1, "state-restored"),
                  event(111, "gen", 1, 1, "warming-up", unknown)]  # fmt: skip
    found = resumption(never_knew, [restart], 0.5)
    assert found.held and found.numbers["blind_before"] == ["gen"]
    knew_then_lost = [event(80, "gen", 1, 1, "warming-up", unknown), event(90, "gen", 1, 2, "scale-up"),
                      *never_knew[1:]]  # fmt: skip
    assert "blind" in resumption(knew_then_lost, [restart], 0.5).violations[0]


def test_an_outage_must_hold_and_say_so_within_two_ticks():
    outage = Fault("outage", 100.0, "driver's link down", lifted=130.0)
    held = [event(100.6, "work", 3, 3, "metrics-unavailable"), event(131, "work", 3, 2, "scale-down")]
    found = outage_holds(held, [outage], tick=0.5)
    assert found.held and found.numbers["said_within_s"] == [0.6]
    down = [*held, event(115, "work", 3, 1, "scale-down")]
    assert "3 → 1 during the outage" in outage_holds(down, [outage], 0.5).violations[0]
    late = [event(110, "work", 3, 3, "metrics-unavailable")]
    assert "said 10.0 s after" in outage_holds(late, [outage], 0.5).violations[0]
    assert "never said" in outage_holds([], [outage], 0.5).violations[0]


def test_recovery_is_the_later_of_the_first_delivery_and_the_backlog_back():
    fault = Fault("nats", 100.0, "w2's nats-server killed")
    series = [row(99, 2, 300), row(101, 2, 900), row(110, 3, 1200), row(120, 3, 250)]
    [got] = recovery([fault], [95.0, 99.0, 104.0, 108.0], series, "work")
    assert (got["first_delivery_s"], got["backlog_back_s"], got["recovery_s"]) == (4.0, 20.0, 20.0)
    [never] = recovery([fault], [95.0], series[:3], "work")
    assert never["recovery_s"] is None


def test_slo_shares_split_inside_and_outside_the_fault_windows():
    fast = DelaySample(10.0, 100, tuple(0.1 + i * 0.001 for i in range(101)))
    slow = DelaySample(50.0, 100, tuple(1.0 + i * 0.1 for i in range(101)))
    cold = DelaySample(5.0, 50, tuple(20.0 + i * 0.1 for i in range(101)))
    samples = [cold, fast, slow]
    assert settled_at(samples, 2.0) == 10.0
    shares = slo_shares(samples, target=2.0, windows=[(40.0, 60.0)], settled=settled_at(samples, 2.0))
    assert shares["outside"] == 1.0 and 0.05 < shares["inside"] < 0.15 and shares["start"] == 0.0
    assert shares["messages_inside"] == shares["messages_outside"] == 100 and shares["messages_start"] == 50
