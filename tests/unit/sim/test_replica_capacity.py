"""A replica's capacity at a full batch (tidal.controller.replica_capacity): a task's busy time is
a fixed part plus a part per message, told apart from the ticks' tasks, messages and busy time."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal.controller import PolicyInput
from tidal.controller.adaptive import AdaptivePolicy
from tidal.controller.replica_capacity import ReplicaCapacity, TaskCost
from tidal.scaling import Decision, NumaflowScale

from .views import view

FIXED, RATE = 0.064, 389.0  # a task's fixed seconds and messages/s beyond it: the cluster's step


@given(
    fixed=st.floats(0.0, 1.0),
    rate=st.floats(50.0, 5000.0),
    ticks=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 500)), min_size=3, max_size=60),
)
def test_the_fixed_part_and_the_rate_are_recovered_from_ticks_that_differ(fixed, rate, ticks) -> None:
    fit = TaskCost()
    for tasks, per_task in ticks:
        fit.add(tasks, tasks * per_task, tasks * fixed + tasks * per_task / rate)
    got = fit.fit()
    sizes = [per_task for _, per_task in ticks]
    if len(set(sizes)) == 1:
        assert got is None  # every task held as many: the two parts cannot be told apart
    elif got is not None:
        assert got[0] == pytest.approx(fixed, abs=1e-6)
        assert got[1] == pytest.approx(rate, rel=1e-6)


def test_ticks_whose_tasks_all_held_as_many_give_no_fit_and_noise_gives_no_negative_cost() -> None:
    same = TaskCost()
    for tasks in (1, 3, 2, 5):
        same.add(tasks, tasks * 100, tasks * (FIXED + 100 / RATE))
    assert same.fit() is None
    negative = TaskCost()  # busier per task the fewer messages it held: no cost model fits
    negative.add(1, 10, 1.0)
    negative.add(1, 400, 0.5)
    assert negative.fit() is None


def light_load(observe: Callable[[PolicyInput], object], counted: bool, seconds: int = 60) -> object:
    """One warm replica at ~150/s in micro-batches of 10–60 messages (a few tasks a tick), its
    busy time ``FIXED`` a task plus the messages at ``RATE``: the spike's first minute. What
    ``observe`` said at the last tick."""
    noise = random.Random(0)
    processed = busy = tasks = 0.0
    said: object = None
    for t in range(seconds + 1):
        n = noise.randint(2, 5)
        messages = sum(noise.randint(10, 60) for _ in range(n))
        processed, busy, tasks = processed + messages, busy + n * FIXED + messages / RATE, tasks + n
        tick = view("work", t, 1, processed, 0, busy)
        said = observe(dataclasses.replace(tick, tasks=tasks if counted else None))
    return said


def test_at_light_load_the_work_rate_is_taken_at_a_full_batch_not_at_the_tasks_held() -> None:
    plain, counted = ReplicaCapacity(batch_guess_seconds=0.25), ReplicaCapacity(batch_guess_seconds=0.25)
    light_load(plain.observe, counted=False)
    light_load(counted.observe, counted=True)
    assert plain.work_rate is not None and plain.work_rate < 0.65 * RATE  # the ratio: ~230/s
    assert plain.capacity == pytest.approx(500 / (0.25 + 500 / plain.work_rate))
    assert counted.task_fit == pytest.approx((FIXED, RATE), rel=1e-3)
    full = 500 / (FIXED + 500 / RATE)  # ~367/s: a full task's messages over its busy time
    assert counted.full_batch_rate == pytest.approx(full, rel=1e-3)
    assert counted.capacity == pytest.approx(500 / (0.25 + 500 / full), rel=1e-3)
    assert counted.source == "busy time, 0.06 s a task + 389/s, 0.25 s a batch"


def test_the_decisions_say_what_a_task_costs() -> None:
    policy = AdaptivePolicy(NumaflowScale(max=10))
    decision = light_load(policy.decide, counted=True)
    assert isinstance(decision, Decision)
    assert decision.inputs["task_seconds"] == pytest.approx(FIXED, rel=1e-3)
    assert decision.inputs["message_rate"] == pytest.approx(RATE, rel=1e-3)


def saturated_ticks(capacity: ReplicaCapacity, pending: list[float], replicas: int = 1) -> None:
    """One warm replica (busy time 400/s) doing 100 messages a tick, ``pending`` at each tick,
    ``replicas`` asked for from the last tick on."""
    for t in range(10):
        capacity.observe(view("work", t, 1, 100.0 * t, 0, t / 4))
    for i, waiting in enumerate(pending, start=10):
        asked = replicas if i == 10 + len(pending) - 1 else 1
        capacity.observe(view("work", i, asked, 100.0 * i, waiting, i / 4, ready=1))


def test_only_a_backlog_through_the_whole_tick_teaches_what_a_replica_sustains() -> None:
    first = ReplicaCapacity(batch_guess_seconds=0.25)
    saturated_ticks(first, [0, 0, 5_000])  # a spike's first tick: what was done came before it
    assert first.sustained is None and first.batch_cost == 0.25
    starting = ReplicaCapacity(batch_guess_seconds=0.25)
    saturated_ticks(starting, [5_000, 5_000], replicas=3)  # two asked for, not ready yet
    assert starting.sustained is None and starting.batch_cost == 0.25
    through = ReplicaCapacity(batch_guess_seconds=0.25)
    saturated_ticks(through, [5_000] * 12)  # 100/s with a backlog throughout: 100/s sustained
    assert through.sustained == pytest.approx(100)
    assert through.batch_cost == pytest.approx(3.75)  # 500/100 - 500/400: two spans and the guess


def test_one_span_of_a_new_executors_first_batches_does_not_move_the_batch_cost() -> None:
    """The cluster's bursts (2026-11-29): a new executor's first batches took 3–7 s and landed in
    one saturated tick; averaged in at 0.3 a tick, they taught 0.4–0.49 s a batch, and ``orders``
    was sized at 600–1,700/s a replica where one did 2,000/s. The median of the spans keeps the
    cost the other spans show."""
    capacity = ReplicaCapacity(batch_guess_seconds=0.25)
    processed = busy = 0.0
    for t in range(10):  # one warm replica: 500 a tick, tasks busy 0.05 s a tick
        processed, busy = processed + 500, busy + 0.05
        capacity.observe(view("orders", t, 1, processed, 100, busy))
    lumps = {13: 80, 33: 120}  # two ticks of a cold executor's first batches, bursts apart
    for t in range(10, 60):
        done = lumps.get(t, 2_000)  # 2,000 a tick: four batches of 500, 0.2 s each beyond the work
        processed, busy = processed + done, busy + done / 10_000
        capacity.observe(view("orders", t, 1, processed, 9_000, busy))
    assert capacity.batch_cost == pytest.approx(0.2, abs=0.01)
    assert capacity.capacity == pytest.approx(2_000, rel=0.05)


def test_a_query_restart_after_a_replica_change_teaches_no_batch_cost() -> None:
    """The cluster's step (2026-11-29): `enrich` went 2 → 1, its query restarted for 5 s with
    nothing done while 1,400 messages came to wait, and the first batch after it held 42. That
    warm, saturated tick implied 10.7 s a batch; capped at 5 s, it taught 1.68 s at once (a
    replica sustaining 159/s where one then did 362/s), and the step was sized 3 → 6 and back
    to 3. A stall teaches nothing."""
    capacity = ReplicaCapacity(batch_guess_seconds=0.25)
    processed = busy = 0.0
    for t in range(20):  # two warm replicas at 400/s of busy time, keeping up with 200/s
        processed, busy = processed + 200, busy + 0.5
        capacity.observe(view("work", t, 2, processed, 100, busy))
    for t in range(20, 26):  # one replica from here on: its query restarts, nothing done
        capacity.observe(view("work", t, 1, processed, 100 + 250 * (t - 19), busy))
    processed, busy = processed + 42, busy + 0.1  # the first batch after the restart: 42 messages
    capacity.observe(view("work", 26, 1, processed, 1_600, busy))
    assert capacity.batch_cost == 0.25
    for t in range(27, 43):  # then full batches: 500 a second, saturated and warm
        processed, busy = processed + 500, busy + 1.25
        capacity.observe(view("work", t, 1, processed, 1_600, busy))
    assert capacity.batch_cost < 0.25  # 500 a second at 400/s of busy time: no cost beyond it


def test_a_saturated_span_implying_more_than_a_batch_could_cost_is_a_stall_and_teaches_nothing() -> None:
    capacity = ReplicaCapacity(batch_guess_seconds=0.25)
    saturated_ticks(capacity, [5_000] * 12)  # 100/s at 400/s of busy time: 3.75 s a batch, learnt
    learnt = capacity.batch_cost
    assert 0.25 < learnt < 5
    processed, busy = 100.0 * 21, 21 / 4
    for t in range(22, 27):  # a span with 20 done in 5 s: 125 s a batch
        capacity.observe(view("work", t, 1, processed, 5_000, busy))
    capacity.observe(view("work", 27, 1, processed + 20, 5_000, busy + 0.05))
    assert capacity.batch_cost == learnt


def staircase(capacity: ReplicaCapacity, seconds: float, pending: float, tick: float = 1.0) -> None:
    """The cluster's step (2026-11-29): three warm replicas of ``enrich`` committing 1,500 every
    1.3 s (500 a task, each task busy 1.13 s), seen by the controller's ticks every ``tick`` s."""
    processed = busy = 0.0
    commits = iter(1.3 * k for k in range(1, 10_000))
    due = next(commits)
    for i in range(int(seconds / tick) + 1):
        now = tick * i
        while due <= now:
            processed, busy, due = processed + 1_500, busy + 3 * 1.13, next(commits)
        capacity.observe(view("enrich", now, 3, processed, pending, busy))


def test_commits_seen_by_shorter_ticks_teach_the_batch_cost_and_what_a_replica_did() -> None:
    """Learnt from the ticks that saw a commit, the step's nine saturated ticks implied 0 s a
    batch, and a 4 s window from just before a commit to just after the fourth counted 500/s a
    replica: ``enrich`` went 3 → 2 and back six times under 900/s. Commit to commit, the three
    replicas sustain 1,500 / 1.3 / 3 = 385/s at 1.3 − 1.13 = 0.17 s a batch."""
    for tick in (1.0, 0.5):
        saturated = ReplicaCapacity(batch_guess_seconds=0.25)
        staircase(saturated, 120, pending=5_000, tick=tick)
        assert saturated.batch_cost == pytest.approx(0.17, abs=0.05), tick
        assert saturated.sustained == pytest.approx(385, rel=0.08), tick
        assert saturated.did is not None and saturated.did[0] < 1.1 * 385, tick
        assert saturated.capacity == pytest.approx(385, rel=0.1), tick
        keeping_up = ReplicaCapacity(batch_guess_seconds=0.25)
        staircase(keeping_up, 120, pending=100, tick=tick)
        assert keeping_up.did is not None and keeping_up.did[0] < 1.1 * 385, tick


def test_a_stall_between_commits_ends_the_span_instead_of_teaching_a_batch_cost() -> None:
    """The cluster's waves (2026-11-30): at a wave's start `orders` committed 500 every 0.32 s
    (0.07 s of work, 0.25 s beside it) with a 4 s pause every few batches while executors
    started. Spans across the pauses taught 0.9–1.6 s a batch (503/s a replica, where one did
    1,600/s); a span now starts again after commits further apart than twice a batch."""
    capacity = ReplicaCapacity(batch_guess_seconds=0.25)
    processed = busy = 0.0
    commits: list[float] = []
    t = 0.0
    while t < 200:
        for _ in range(12):
            t += 0.32
            commits.append(t)
        t += 4.0  # a stall
    due = iter(commits)
    at = next(due)
    for i in range(400):
        now = 0.5 * i
        while at <= now:
            processed, busy, at = processed + 500, busy + 500 / 7_000, next(due)
        capacity.observe(view("orders", now, 1, processed, 9_000, busy))
    assert capacity.batch_cost == pytest.approx(0.25, abs=0.06)
    assert capacity.capacity == pytest.approx(500 / 0.32, rel=0.15)
