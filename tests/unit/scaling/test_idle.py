"""Numaflow's idle-source watermark rule (tidal.scaling.idle): threshold, stepInterval,
incrementBy, initSourceDelay, never past now; and Tidal's two rules (drained, horizon)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal.scaling import idle

P = idle.IdleParams(threshold=5.0, increment_by=2.0, step_interval=2.0)
NOW = 1_000.0


def _sent(at: float, t: float) -> idle.InputIdle:
    return idle.observe(idle.InputIdle(quiet_since=0.0), at, t)


@pytest.mark.parametrize(
    ("state", "now", "drained", "until", "expected"),
    [
        pytest.param(_sent(NOW, 500.0), NOW + 4.9, True, 600.0, None, id="quiet-shorter-than-threshold"),
        pytest.param(_sent(NOW, 500.0), NOW + 5.0, True, 600.0, 502.0, id="idle-steps-by-incrementBy"),
        pytest.param(_sent(NOW, 500.0), NOW + 9.0, False, 600.0, None, id="something-waits-upstream"),
        pytest.param(_sent(NOW, 500.0), NOW + 9.0, True, 500.0, None, id="past-the-horizon-nothing-to-close"),
        pytest.param(_sent(NOW, 500.0), NOW + 9.0, True, None, None, id="no-data-in-the-vertex"),
        pytest.param(_sent(NOW, NOW + 6.0), NOW + 5.0, True, NOW + 100, None, id="data-ahead-of-the-clock"),
        pytest.param(_sent(NOW - 5, NOW - 0.5), NOW, True, NOW + 100, NOW, id="idle-never-past-now"),
    ],
)
def test_one_step(state, now, drained, until, expected):
    _, t = idle.step(state, P, now, drained=drained, until=until)
    assert t == expected


def test_steps_wait_a_step_interval_and_data_resets_the_input():
    state = _sent(NOW, 500.0)
    state, t1 = idle.step(state, P, NOW + 5.0, drained=True, until=600.0)
    state, t2 = idle.step(state, P, NOW + 6.0, drained=True, until=600.0)  # 1 s < stepInterval
    state, t3 = idle.step(state, P, NOW + 7.0, drained=True, until=600.0)
    assert (t1, t2, t3) == (502.0, None, 504.0)
    state = idle.observe(state, NOW + 7.5, 503.0)  # a message (older than the idle watermark)
    assert state.last_t == 504.0  # the watermark never goes back
    _, t = idle.step(state, P, NOW + 8.0, drained=True, until=600.0)
    assert t is None  # busy again: a threshold to wait


def test_upstream_work_keeps_an_input_busy():
    state = _sent(NOW, 500.0)
    state, t = idle.step(state, P, NOW + 10.0, drained=False, until=600.0)
    assert t is None
    _, t = idle.step(state, P, NOW + 14.0, drained=True, until=600.0)
    assert t is None  # 4 s since upstream was last seen busy
    _, t = idle.step(state, P, NOW + 15.0, drained=True, until=600.0)
    assert t == 502.0


def test_an_input_that_never_sent_starts_at_now_after_init_source_delay_as_numaflow():
    fresh = idle.InputIdle(quiet_since=NOW)
    with_delay = idle.IdleParams(5.0, 2.0, init_source_delay=10.0)
    assert idle.step(fresh, with_delay, NOW + 9.0, drained=True, until=600.0)[1] is None
    assert idle.step(fresh, with_delay, NOW + 10.0, drained=True, until=600.0)[1] == NOW + 10.0
    assert idle.step(fresh, P, NOW + 1e6, drained=True, until=600.0)[1] is None  # unset: holds for good


def test_the_horizon_is_the_latest_data_plus_the_span():
    assert idle.horizon(None, 12.0) is None
    assert idle.horizon(100.0, 12.0) == 112.0


@given(
    st.lists(
        st.tuples(st.floats(0.0, 3.0), st.booleans(), st.booleans(), st.floats(0.0, 10.0)),
        min_size=1,
        max_size=60,
    ),
    st.floats(0.1, 5.0),
    st.floats(0.1, 5.0),
    st.floats(0.0, 3.0),
)
def test_idle_watermarks_rise_never_pass_now_or_the_horizon_by_more_than_a_step(
    events, threshold, increment_by, step_interval
):
    params = idle.IdleParams(threshold, increment_by, step_interval)
    now, state, until = NOW, idle.observe(idle.InputIdle(quiet_since=NOW), NOW, NOW - 50.0), NOW - 20.0
    previous = state.last_t
    for gap, drained, data, lag in events:
        now += gap
        if data:
            state = idle.observe(state, now, now - lag)
        state, t = idle.step(state, params, now, drained=drained, until=until)
        assert state.last_t is not None and previous is not None and state.last_t >= previous
        if t is not None:
            assert t <= now  # never a watermark past now (− maxDelay, once Spark subtracts it)
            assert t > previous and t <= previous + increment_by
            assert previous < until  # no step once the horizon is reached
        previous = state.last_t
