"""The executor allocator's rules: executors follow Σ replicas, idle ones are killed first,
busy ones only after shrinkWaitSeconds, and ready replicas are the cores that exist."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal.errors import SpecError
from tidal.scaling.executors import (
    Executor,
    ExecutorBounds,
    ExecutorDecision,
    ExecutorRule,
    decide_executors,
    ready_slots,
)

TWO = ExecutorBounds(cores=2, min=1, max=4, shrink_wait=30)


def ex(id_: str, active: int = 0, added: float = 0.0) -> Executor:
    return Executor(id_, "127.0.0.1", 2, active_tasks=active, added_at=added)


@pytest.mark.parametrize(
    ("replicas", "expected"),
    [(0, 1), (1, 1), (2, 1), (3, 2), (7, 4), (8, 4), (50, 4)],
)
def test_executors_are_ceil_replicas_over_cores_within_bounds(replicas, expected):
    assert TWO.needed(replicas) == expected


def test_growing_requests_the_new_total_and_says_why():
    d = decide_executors(10.0, 7, [ex("1"), ex("2")], requested=2, bounds=TWO)
    assert d.rule is ExecutorRule.GROW and d.target == 4 and d.kill == () and d.changed
    assert d.reason == "Σ replicas 7 on 2-core executors → 4 executors; 2 registered: requesting 4"
    assert d.inputs["replicas"] == 7 and d.inputs["registered"] == 2


def test_requested_executors_not_registered_yet_are_waited_for():
    d = decide_executors(10.0, 7, [ex("1"), ex("2")], requested=4, bounds=TWO)
    assert d.rule is ExecutorRule.STARTING and not d.changed


def test_after_start_failures_no_more_executors_are_asked_for_until_the_back_off_ends():
    why = "2 exited before registering: Error: Could not create the Java Virtual Machine."
    held = decide_executors(10.0, 7, [ex("1")], 4, TWO, backoff_until=30.0, backoff_why=why)
    assert held.rule is ExecutorRule.BACKOFF and held.target == 1 and held.changed  # 4 → 1: no relaunches
    assert "executors failed to start (2 exited" in held.reason and "for 20 s" in held.reason, held.reason
    after = decide_executors(31.0, 7, [ex("1")], 1, TWO, backoff_until=30.0, backoff_why=why)
    assert after.rule is ExecutorRule.GROW and after.target == 4  # then it asks again
    # A back-off never stops a shrink or a steady state.
    shrink = decide_executors(10.0, 0, [ex("1"), ex("2")], requested=2, bounds=TWO, backoff_until=30.0)
    assert shrink.rule is ExecutorRule.SHRINK and shrink.target == 1


def test_shrinking_kills_idle_executors_newest_first_never_a_busy_one():
    executors = [ex("1", active=1, added=1), ex("2", added=2), ex("3", added=3), ex("4", active=2, added=4)]
    d = decide_executors(10.0, 3, executors, requested=4, bounds=TWO)  # 3 replicas → 2 executors
    assert d.rule is ExecutorRule.SHRINK and d.target == 2
    assert d.kill == ("3", "2")
    assert "killing idle executors 3, 2" in d.reason


def test_a_shrink_with_only_busy_executors_waits_then_kills_the_least_busy():
    executors = [ex("1", active=2, added=1), ex("2", active=1, added=2)]
    waiting = decide_executors(10.0, 1, executors, requested=2, bounds=TWO, shrink_since=0.0)
    assert waiting.rule is ExecutorRule.SHRINK_WAITING and waiting.kill == () and waiting.target == 1
    assert "waiting for one to go idle (10 of 30 s)" in waiting.reason
    forced = decide_executors(31.0, 1, executors, requested=2, bounds=TWO, shrink_since=0.0)
    assert forced.rule is ExecutorRule.SHRINK and forced.kill == ("2",)
    assert "no idle executor for 31 s" in forced.reason and "runs again" in forced.reason


def test_bounds_are_named_in_the_reason():
    assert "(maxExecutors 4)" in decide_executors(0.0, 20, [ex(str(i)) for i in range(4)], 4, TWO).reason
    assert "(minExecutors 1)" in decide_executors(0.0, 0, [ex("1")], 1, TWO).reason


def test_a_decision_round_trips_through_its_dict():
    d = decide_executors(10.0, 3, [ex("1"), ex("2"), ex("3")], requested=3, bounds=TWO)
    assert ExecutorDecision.from_dict({"kind": "decision", **d.to_dict()}) == d


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("cluster.executorCores", {"cores": 0}),
        ("cluster.minExecutors", {"min": -1}),
        ("cluster.maxExecutors", {"min": 5, "max": 4}),
        ("cluster.shrinkWaitSeconds", {"shrink_wait": -1}),
        ("cluster.executorIdleSeconds", {"idle_seconds": -1}),
    ],
)
def test_bad_bounds_name_the_field(field, kwargs):
    with pytest.raises(SpecError, match=field.replace(".", r"\.")):
        ExecutorBounds(**kwargs)


@given(
    replicas=st.integers(0, 200),
    registered=st.integers(0, 12),
    busy=st.lists(st.booleans(), min_size=12, max_size=12),
    requested=st.integers(0, 12),
    cores=st.integers(1, 4),
    low=st.integers(0, 3),
    span=st.integers(0, 8),
    waited=st.floats(0, 100),
)
def test_properties_of_every_decision(replicas, registered, busy, requested, cores, low, span, waited):
    bounds = ExecutorBounds(cores=cores, min=low, max=max(1, low + span), shrink_wait=30)
    executors = [Executor(str(i), "h", cores, int(busy[i]), added_at=i) for i in range(registered)]
    d = decide_executors(100.0, replicas, executors, requested, bounds, shrink_since=100.0 - waited)
    assert bounds.min <= d.target <= bounds.max
    assert d.target * cores >= min(replicas, bounds.max * cores)  # enough cores, unless capped
    assert len(d.kill) <= max(0, registered - d.target)  # never below the target
    assert len(set(d.kill)) == len(d.kill)
    if waited < 30:  # a busy executor is killed only after shrinkWaitSeconds
        assert all(not busy[int(i)] for i in d.kill)
    if d.target >= registered:
        assert d.kill == ()


@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 20), min_size=1), st.integers(0, 60))
def test_ready_slots_never_exceed_the_slots_or_what_a_vertex_asked_for(replicas, slots):
    ready = ready_slots(replicas, slots)
    assert set(ready) == set(replicas)
    assert sum(ready.values()) == min(slots, sum(replicas.values()))
    assert all(0 <= ready[v] <= replicas[v] for v in replicas)


def test_an_idle_vertexs_replicas_hold_no_executor_and_the_reason_names_it():
    """enrich keeps 6 replicas through its cooldowns, but has had nothing to do for 10 s: only the
    source's replica needs a slot (Spark's dynamic allocation would have let the executors go)."""
    executors = [ex(str(i), added=i) for i in range(1, 5)]
    d = decide_executors(50.0, 7, executors, requested=4, bounds=TWO, idle={"enrich": 6})
    assert d.rule is ExecutorRule.SHRINK and d.target == 1 and set(d.kill) == {"4", "3", "2"}
    assert d.reason == (
        "Σ replicas 7, 6 of them idle (enrich 6: nothing pending or processed for 10 s) on 2-core "
        "executors → 1 executor; 4 registered: killing idle executors 4, 3, 2"
    ), d.reason
    assert d.replicas == 7 and d.inputs["idle"] == {"enrich": 6}
    # Work again: its replicas count at once.
    again = decide_executors(60.0, 7, executors[:1], requested=1, bounds=TWO, idle={})
    assert again.rule is ExecutorRule.GROW and again.target == 4


@given(
    replicas=st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 9), min_size=1),
    slots=st.integers(0, 40),
    data=st.data(),
)
def test_idle_vertices_are_ready_whole_and_the_slots_go_to_the_others(replicas, slots, data):
    idle = data.draw(st.sets(st.sampled_from(sorted(replicas))))
    ready = ready_slots(replicas, slots, idle)
    assert ready.keys() == replicas.keys()
    assert all(ready[n] == replicas[n] for n in idle)
    working = {n: r for n, r in replicas.items() if n not in idle}
    assert {n: ready[n] for n in working} == ready_slots(working, slots)


def test_the_bounds_come_from_the_pipelines_cluster_block_idle_seconds_included():
    from tidal.spec import parse_pipeline

    doc = {"name": "p", "cluster": {"executorCores": 2, "executorIdleSeconds": 4},
           "vertices": [{"name": "g", "source": {"generator": {"rate": 1}}},
                        {"name": "o", "sink": {"log": {}}}],
           "edges": [{"from": "g", "to": "o"}]}  # fmt: skip
    assert ExecutorBounds.of(parse_pipeline(doc).cluster) == ExecutorBounds(2, 0, 8, 30.0, 4.0)
    assert ExecutorBounds.of(parse_pipeline({**doc, "cluster": {}}).cluster).idle_seconds == 10.0
