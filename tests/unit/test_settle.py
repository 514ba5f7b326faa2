"""tidal.controller.settle: the horizon a backlog drains in, and the down window."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidal.controller.settle import SLACK, CatchUp, DownWindow


def test_a_start_drains_in_the_catch_up_and_a_rise_under_load_in_the_settle() -> None:
    horizon = CatchUp(10.0, 45.0)
    assert horizon.horizon(0, backlog=5000, arriving=1000, startup=8, tick=1) == 10  # a start
    assert horizon.horizon(1, backlog=500, arriving=1000, startup=8, tick=1) == 10  # then drained
    assert horizon.horizon(2, backlog=8000, arriving=2000, startup=8, tick=1) == 45  # a rise
    horizon.started()  # idle, or at 0
    assert horizon.horizon(3, backlog=8000, arriving=2000, startup=8, tick=1) == 10


def test_a_backlog_that_stopped_falling_is_drained_by_replicas() -> None:
    horizon = CatchUp(10.0, 45.0)
    horizon.horizon(0, backlog=0, arriving=1000, startup=8, tick=1)
    seen = [horizon.horizon(t, backlog=9000 - 10 * t, arriving=2000, startup=8, tick=1) for t in range(1, 17)]
    assert set(seen) == {45}  # falling, or within two start-ups of the rise
    later = [
        horizon.horizon(t, backlog=9000 - 10 * 16, arriving=2000, startup=8, tick=1) for t in range(17, 30)
    ]
    assert later[-1] == 10  # flat for a start-up: the headroom is not there


def test_a_backlog_growing_while_replicas_start_is_no_stall() -> None:
    """Replicas that take longer to start than the start-up learnt (a cluster's executors: 15-25 s
    where 5 s was learnt) leave the backlog growing: the stall is judged once they are ready."""
    horizon = CatchUp(10.0, 45.0)
    horizon.horizon(0, backlog=0, arriving=1000, startup=5, tick=1)
    starting = [
        horizon.horizon(t, backlog=1000 * t, arriving=2000, startup=5, tick=1, starting=True)
        for t in range(1, 25)
    ]
    assert set(starting) == {45}
    ready = [
        horizon.horizon(t, backlog=24_000 - 500 * (t - 24), arriving=2000, startup=5, tick=1)
        for t in range(25, 40)
    ]
    assert set(ready) == {45}  # falling once they are ready: the headroom drains it
    flat = [horizon.horizon(t, backlog=16_500, arriving=2000, startup=5, tick=1) for t in range(40, 47)]
    assert flat[:4] == [45] * 4 and flat[-1] == 10  # flat for a start-up with all ready: a stall


def test_the_headroom_has_its_time_and_no_more() -> None:
    horizon = CatchUp(10.0, 45.0)
    horizon.horizon(0, backlog=0, arriving=1000, startup=8, tick=1)
    end = SLACK * 45 + 8
    ticks = range(1, int(end) + 3)
    seen = {t: horizon.horizon(t, backlog=90_000 - 1000 * t, arriving=2000, startup=8, tick=1) for t in ticks}
    assert seen[int(end)] == 45 and seen[int(end) + 2] == 10


def test_without_a_settle_every_backlog_drains_by_replicas() -> None:
    horizon = CatchUp(10.0, None)
    horizon.horizon(0, backlog=0, arriving=1000, startup=8, tick=1)
    assert horizon.horizon(1, backlog=8000, arriving=2000, startup=8, tick=1) == 10


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50)), min_size=1, max_size=60))
def test_the_down_window_holds_the_most_of_its_window_and_its_recent_half(
    steps: list[tuple[int, int]],
) -> None:
    window, now, noted = DownWindow(), 0.0, []
    for gap, replicas in steps:
        now += gap
        window.note(now, replicas, 30.0)
        noted.append((now, replicas))
    inside = [r for t, r in noted if t >= now - 30.0]
    assert window.peak() == max(inside)
    assert window.recent(now, 30.0) == max(r for t, r in noted if t >= now - 15.0)
    assert window.recent(now, 30.0) <= window.peak()
