"""Every trace generator has the shape it promises, and a seed fixes it."""

from __future__ import annotations

import statistics

import pytest

from tidal.sim import TRACES, make_trace
from tidal.sim.traces import bursty, diurnal, idle, spike, square, step_half, step_x2, step_x10


@pytest.mark.parametrize("name", list(TRACES))
def test_same_seed_same_trace(name: str) -> None:
    assert make_trace(name, 7) == make_trace(name, 7)


@pytest.mark.parametrize("name", ["diurnal", "bursty"])
def test_random_traces_change_with_the_seed(name: str) -> None:
    assert make_trace(name, 1).rates != make_trace(name, 2).rates


@pytest.mark.parametrize("name", list(TRACES))
def test_arrivals_are_whole_messages_that_add_up(name: str) -> None:
    trace = make_trace(name)
    arrivals = trace.arrivals()
    assert len(arrivals) == trace.duration
    assert all(isinstance(n, int) and n >= 0 for n in arrivals)
    assert abs(sum(arrivals) - sum(trace.rates)) < 1


def test_arrivals_carry_fractions() -> None:
    trace = step_x2(base=0.5, at=2, duration=4)  # 0.5, 0.5, 1, 1
    assert trace.arrivals() == [0, 1, 1, 1]


@pytest.mark.parametrize(
    ("factory", "before", "after"), [(step_x2, 1000, 2000), (step_half, 2000, 1000), (step_x10, 300, 3000)]
)
def test_steps(factory, before: float, after: float) -> None:
    trace = factory()
    assert set(trace.rates[:300]) == {before}
    assert set(trace.rates[300:]) == {after}
    assert trace.steps == (300.0,)


def test_spike_is_ten_times_for_a_minute() -> None:
    trace = spike()
    high = [t for t, r in enumerate(trace.rates) if r == 5000]
    assert high == list(range(300, 360))
    assert set(trace.rates) == {500, 5000}
    assert trace.steps == (300.0, 360.0)


def test_square_wave_has_a_600_second_period() -> None:
    trace = square()
    assert trace.rates[0:300] == (400.0,) * 300
    assert trace.rates[300:600] == (2000.0,) * 300
    assert trace.rates[600:900] == (400.0,) * 300
    assert trace.steps[:3] == (300.0, 600.0, 900.0)


def test_diurnal_night_low_noon_high_with_noise() -> None:
    trace = diurnal(seed=3)
    night = statistics.mean(trace.rates[:60])
    noon = statistics.mean(trace.rates[870:930])
    assert 150 < night < 260  # 1000 − 800, plus a little of the curve
    assert 1700 < noon < 1900
    clean = diurnal(seed=3, noise=0.0)
    residual = [a / b - 1 for a, b in zip(trace.rates, clean.rates, strict=True) if b > 0]
    assert 0.03 < statistics.pstdev(residual) < 0.07  # 5 % noise
    assert min(trace.rates) >= 0


def test_bursty_is_on_off_with_heavy_tailed_gaps() -> None:
    trace = bursty(seed=11, duration=20_000)
    assert set(trace.rates) == {0.0, 1500.0}
    gaps, on = [], []
    run_value, run_length = trace.rates[0], 0
    for r in trace.rates:
        if r == run_value:
            run_length += 1
        else:
            (on if run_value else gaps).append(run_length)
            run_value, run_length = r, 1
    assert min(gaps) >= 1
    assert statistics.median(gaps) < 30  # most gaps are short…
    assert max(gaps) > 10 * statistics.median(gaps)  # …and a few are very long (Pareto tail)
    assert 15 < statistics.mean(on) < 45  # exponential bursts, mean 30 s
    assert all(trace.rates[int(t)] == 1500 and trace.rates[int(t) - 1] == 0 for t in trace.steps if t > 0)


def test_idle_has_ten_minute_silences() -> None:
    trace = idle()
    assert trace.steps == (60.0, 720.0, 1380.0)
    assert trace.rates[60:120] == (800.0,) * 60
    assert set(trace.rates[120:720]) == {0.0}


def test_unknown_trace_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown trace 'sqaure': choose one of step-x2, .*square"):
        make_trace("sqaure")
