"""The state-partition policy (tidal.scaling.state_partitions): its rules, its bounds, no flapping."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tidal.scaling.state_partitions import (
    DOWN_SHARE,
    MIN_BATCHES,
    UP_SHARE,
    BatchTiming,
    PartitionBounds,
    StateLoad,
    decide_partitions,
    state_share,
)

BOUNDS = PartitionBounds(min=1, max=16, cooldown=60.0)


def batches(busy: float, wall: float = 2.0, count: int = 5) -> tuple[BatchTiming, ...]:
    return tuple(BatchTiming(i, wall, busy) for i in range(count))


def load(partitions: int, busy: float, pending: float, rate: float = 1000.0, **kw) -> StateLoad:
    return StateLoad(
        partitions=partitions,
        cores=kw.pop("cores", 8),
        batches=kw.pop("timed", None) or batches(busy),
        pending=pending,
        rate=rate,
        target_seconds=kw.pop("target", 3.0),
        **kw,
    )


def test_a_backlog_with_the_state_stage_the_bottleneck_moves_up_in_one_step():
    # 2 partitions each busy 1.8 s of a 2 s batch (share 0.9); 20 s of backlog at 1,000/s.
    d = decide_partitions(load(2, busy=3.6, pending=20_000), BOUNDS, now=1000.0)
    assert d.rule == "partitions-up" and d.changed
    assert d.desired == 8  # needed 20,000 / 3 s = 6,667/s against 1,000/s: ×6.7, capped at ×4
    assert d.inputs["stateShare"] == 0.9 and d.inputs["backlogSeconds"] == 20.0


def test_a_small_backlog_asks_for_one_more_partition_not_a_jump():
    d = decide_partitions(load(4, busy=7.2, pending=3_600), BOUNDS, now=1000.0)
    assert d.rule == "partitions-up" and d.desired == 5  # 3.6 s of backlog for a 3 s target: ×1.2


def test_a_backlog_elsewhere_than_the_state_stage_holds_and_says_why():
    d = decide_partitions(load(2, busy=0.4, pending=50_000), BOUNDS, now=1000.0)  # share 0.1
    assert not d.changed and d.rule == "partitions-hold"
    assert "would not shorten the batches" in d.reason


def test_an_idle_over_partitioned_vertex_halves():
    d = decide_partitions(load(8, busy=0.8, pending=0), BOUNDS, now=1000.0)  # share 0.05
    assert d.rule == "partitions-down" and d.desired == 4
    assert d.inputs["shareAtHalf"] < DOWN_SHARE


def test_never_below_min_nor_above_the_cores():
    assert decide_partitions(load(1, busy=0.0, pending=0), BOUNDS, now=1000.0).desired == 1
    d = decide_partitions(load(3, busy=5.9, pending=900_000, cores=4), BOUNDS, now=1000.0)
    assert d.desired == 4
    held = decide_partitions(load(4, busy=7.9, pending=900_000, cores=4), BOUNDS, now=1000.0)
    assert not held.changed and "already at the most (4)" in held.reason


def test_a_count_outside_the_bounds_is_brought_back_into_them():
    d = decide_partitions(load(32, busy=1.0, pending=0, cores=64), BOUNDS, now=1000.0)
    assert d.rule == "partitions-bounds" and d.desired == 16


def test_cooldown_grows_with_the_pause_a_move_costs():
    kw = {"last_move_at": 900.0}
    cheap = decide_partitions(load(2, busy=3.6, pending=20_000, pause=1.0, **kw), BOUNDS, now=965.0)
    assert cheap.rule == "partitions-up"  # 65 s after: past max(60, 20 × 1)
    dear = decide_partitions(load(2, busy=3.6, pending=20_000, pause=5.0, **kw), BOUNDS, now=965.0)
    assert dear.rule == "partitions-cooldown" and dear.inputs["cooldown"] == 100.0


def test_too_few_batches_since_the_move_and_a_failed_moves_back_off_hold():
    few = load(2, busy=0, pending=20_000, timed=batches(3.6, count=MIN_BATCHES - 1))
    assert decide_partitions(few, BOUNDS, now=1000.0).rule == "partitions-measuring"
    failed = load(2, busy=3.6, pending=20_000, retry_at=1030.0)
    assert decide_partitions(failed, BOUNDS, now=1000.0).rule == "partitions-backoff"


def test_the_share_is_a_median_so_one_slow_batch_decides_nothing():
    timed = (*batches(0.2, count=4), BatchTiming(9, 2.0, 4.0))
    assert state_share(load(2, busy=0, pending=0, timed=timed)) == 0.05


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 16),
    cores=st.integers(1, 16),
    per_batch=st.floats(0.0, 40.0),
    wall=st.floats(0.5, 10.0),
    pending=st.floats(0, 1e6),
    rate=st.floats(1.0, 1e5),
)
def test_always_within_bounds_and_an_up_move_is_never_undone_by_the_same_work(
    n, cores, per_batch, wall, pending, rate
):
    """Whatever the numbers, the decision stays in [min, min(max, cores)]; and a vertex moved
    up, once its backlog is gone, does not move straight back down on the same work per batch
    (the shares' gap: up needs ``UP_SHARE`` at n, down needs under ``DOWN_SHARE`` at half of m ≤ 4n)."""
    if n > max(BOUNDS.min, min(BOUNDS.max, cores)):
        return
    first = decide_partitions(
        load(n, busy=0, pending=pending, rate=rate, cores=cores, timed=batches(per_batch, wall)), BOUNDS, 0.0
    )
    assert BOUNDS.min <= first.desired <= max(BOUNDS.min, min(BOUNDS.max, cores))
    if first.rule != "partitions-up":
        return
    assert (
        state_share(load(n, busy=per_batch, pending=0, cores=cores, timed=batches(per_batch, wall)))
        >= UP_SHARE
    )
    after = decide_partitions(
        load(first.desired, busy=0, pending=0, rate=rate, cores=cores, timed=batches(per_batch, wall)),
        BOUNDS,
        0.0,
    )
    assert after.rule != "partitions-down", (first.reason, after.reason)
