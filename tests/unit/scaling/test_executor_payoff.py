"""Does one more executor pay? The allocator stops growing where the next executor added less
than ``payoff`` of one executor's delivery, measured while executors were the limit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal.scaling.executor_payoff import ExecutorPayoff, Payoff
from tidal.scaling.executors import Executor, ExecutorBounds, ExecutorRule, decide_executors


def run(
    payoff: ExecutorPayoff,
    start: float,
    seconds: int,
    executors: int,
    rate: float,
    delivered: float,
    pending: float = 1e7,
    wants_all: bool = True,
) -> tuple[float, float]:
    """Looks once a second for ``seconds`` at ``executors`` delivering ``rate``/s; returns the
    time and the cumulative count after the last look."""
    t = start
    for _ in range(seconds):
        t += 1.0
        delivered += rate
        payoff.observe(t, executors, delivered, pending, wants_all)
    return t, delivered


def climb(payoff: ExecutorPayoff, rates: dict[int, float], seconds: int = 20) -> float:
    t, delivered = 0.0, 0.0
    for k, rate in rates.items():
        t, delivered = run(payoff, t, seconds, k, rate, delivered)
    return t


def test_an_executor_that_adds_little_caps_the_count_below_it_and_says_what_was_measured():
    p = ExecutorPayoff(payoff=0.25)
    now = climb(p, {1: 400.0, 2: 700.0, 3: 720.0, 4: 730.0})
    judged = p.judge(now)
    # 2nd: +75 % ≥ 25 % pays; 3rd: +2.9 % < 12.5 % does not: at most 2.
    assert judged.cap == 2
    assert judged.reason == (
        "a 3rd executor added 3%: 700/s → 720/s delivered while executors were the limit; "
        "paying needs 12% (cluster.executorPayoff 0.25) → at most 2"
    )
    assert [k for k, _, _ in judged.rates] == [1, 2, 3, 4]


def test_executors_that_each_add_their_share_are_never_capped():
    p = ExecutorPayoff(payoff=0.25)
    now = climb(p, {1: 300.0, 2: 600.0, 3: 900.0, 4: 1200.0})
    assert p.judge(now).cap is None


def test_the_first_seconds_after_a_change_and_a_thin_backlog_are_not_measured():
    p = ExecutorPayoff(payoff=0.25, settle=5.0, min_seconds=8.0)
    t, d = run(p, 0.0, 20, 1, 400.0, 0.0)
    # 12 s at two executors: the first 5 are their start-up, so 7 s count, fewer than 8.
    t, d = run(p, t, 12, 2, 410.0, d)
    assert p.rate(t, 2) is None and p.judge(t).cap is None
    # A drain's last batches: 600 pending at 410/s is under 5 s of work, so not the limit.
    t, d = run(p, t, 20, 2, 410.0, d, pending=600.0)
    assert p.rate(t, 2) is None
    # Replicas that want fewer executors than are registered: not the limit either.
    t, d = run(p, t, 20, 2, 410.0, d, wants_all=False)
    assert p.rate(t, 2) is None
    t, d = run(p, t, 10, 2, 410.0, d)
    assert p.rate(t, 2) is not None and p.judge(t).cap == 1


def test_what_was_measured_is_forgotten_so_a_cap_is_tried_again():
    p = ExecutorPayoff(payoff=0.25, memory=120.0)
    now = climb(p, {1: 400.0, 2: 410.0})
    assert p.judge(now).cap == 1
    assert p.judge(now + 121.0).cap is None


def test_payoff_zero_is_off():
    p = ExecutorPayoff(payoff=0.0)
    now = climb(p, {1: 400.0, 2: 400.0})
    assert p.judge(now) == Payoff(None, "", ())


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="payoff"):
        ExecutorPayoff(payoff=-1)
    with pytest.raises(ValueError, match="min_seconds"):
        ExecutorPayoff(min_seconds=0)


@given(
    rates=st.lists(st.floats(min_value=1.0, max_value=5000.0), min_size=2, max_size=6),
    share=st.floats(min_value=0.01, max_value=2.0),
)
def test_the_cap_is_the_first_count_whose_next_executor_added_less_than_its_share(rates, share):
    p = ExecutorPayoff(payoff=share)
    now = climb(p, dict(enumerate(rates, start=1)))
    cap = p.judge(now).cap
    measured = {k: p.rate(now, k) for k in range(1, len(rates) + 1)}
    assert all(m is not None for m in measured.values())
    pays = [
        measured[k + 1][0] - measured[k][0] >= share * measured[k][0] / k  # type: ignore[index]
        for k in range(1, len(rates))
    ]
    expected = next((k for k, ok in enumerate(pays, start=1) if not ok), None)
    assert cap == expected


def test_a_jump_of_two_executors_is_judged_on_twice_the_share():
    p = ExecutorPayoff(payoff=0.25)
    now = climb(p, {2: 240.0, 4: 250.0})  # never measured at 3: Numaflow's steps of two replicas
    judged = p.judge(now)
    assert judged.cap == 2
    assert (
        judged.reason.startswith("2 more executors (4) added 4%: 240/s → 250/s")
        and "needs 25%" in judged.reason
    )
    assert ExecutorPayoff(payoff=0.25).judge(climb(ExecutorPayoff(), {})).cap is None
    paying = ExecutorPayoff(payoff=0.25)
    assert paying.judge(climb(paying, {2: 240.0, 4: 310.0})).cap is None  # +29 % ≥ 25 %


def ex(id_: str, active: int = 0, added: float = 0.0) -> Executor:
    return Executor(id_, "127.0.0.1", 2, active_tasks=active, added_at=added)


BOUNDS = ExecutorBounds(cores=2, min=1, max=4)
CAPPED = Payoff(2, "a 3rd executor added 3%: … → at most 2", ((2, 700.0, 20.0), (3, 720.0, 20.0)))


def test_the_allocator_asks_for_no_more_than_the_cap_and_says_why():
    d = decide_executors(10.0, 7, [ex("1"), ex("2")], requested=2, bounds=BOUNDS, payoff=CAPPED)
    assert d.rule is ExecutorRule.STEADY and d.target == 2 and not d.changed
    assert d.reason == (
        "Σ replicas 7 on 2-core executors → 4 executors, capped at 2: "
        "a 3rd executor added 3%: … → at most 2; 2 registered"
    )
    assert d.inputs["delivered_per_executors"] == {"2": 700.0, "3": 720.0}


def test_executors_past_the_cap_are_let_go_and_the_cap_never_goes_below_min_executors():
    d = decide_executors(
        10.0, 7, [ex("1", added=1), ex("2", added=2), ex("3", added=3)], 3, BOUNDS, payoff=CAPPED
    )
    assert d.rule is ExecutorRule.SHRINK and d.target == 2 and d.kill == ("3",)
    low = decide_executors(
        10.0, 7, [ex("1")], 1, ExecutorBounds(cores=2, min=3, max=4), payoff=Payoff(1, "…")
    )
    assert low.target == 3  # minExecutors wins
    below = decide_executors(10.0, 2, [ex("1")], 1, BOUNDS, payoff=CAPPED)
    assert below.target == 1 and "capped" not in below.reason  # a cap above the need changes nothing
