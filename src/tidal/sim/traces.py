"""Traffic traces for the simulator, generated from parameters and a seed (nothing downloaded).

A :class:`Trace` is the offered load, messages per second, one value per second, plus the
moments worth measuring a reaction from (``steps``: when the load rises or falls sharply).
The same name and seed always give the same trace.

The shapes (``TRACES``), each chosen because autoscalers are known to get it wrong:

* ``step-x2``, ``step-x0.5``, ``step-x4``, ``step-x10`` — the load doubles, halves, grows
  fourfold or tenfold at 300 s: reaction time, overshoot, and how many decisions a step takes
  to settle (issue #61 asks for a ×4 step in one per vertex, as DS2 does).
* ``spike`` — ten times the base for 60 s: does the policy chase a burst it cannot catch?
* ``square`` — Nexmark-style square wave, 600 s period (300 s high, 300 s low): oscillation.
* ``diurnal`` — a day compressed into 30 minutes, a sine with 5 % noise: tracking.
* ``bursty`` — on/off with heavy-tailed (Pareto, α = 1.5) gaps, after the Azure Functions
  traces' inter-arrival shape (Shahrad et al., "Serverless in the Wild", USENIX ATC 2020):
  cold starts and wasted idle replicas.
* ``idle`` — short bursts between 10-minute idle spells: scale to zero and back.
* ``waves`` — the demo's: 40 s of load every 110 s, nothing between: periodic, so a policy that
  learns the period can have its replicas ready when each wave comes.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TRACES", "Trace", "make_trace"]


@dataclass(frozen=True)
class Trace:
    """Offered load: ``rates[i]`` messages/s during second ``i``."""

    name: str
    rates: tuple[float, ...]
    steps: tuple[float, ...] = ()  # seconds at which the load changes sharply
    seed: int = 0
    description: str = ""

    @property
    def duration(self) -> int:
        return len(self.rates)

    @property
    def peak(self) -> float:
        return max(self.rates, default=0.0)

    @property
    def total(self) -> int:
        return sum(self.arrivals())

    def arrivals(self) -> list[int]:
        """Whole messages per second: the rates rounded with the remainder carried over, so
        every trace delivers ``round(sum(rates))`` messages and never drifts."""
        out = []
        carry = 0.0
        for rate in self.rates:
            carry += rate
            n = math.floor(carry + 1e-9)
            out.append(n)
            carry -= n
        return out


def _steady(name: str, before: float, after: float, at: int, duration: int, seed: int) -> Trace:
    rates = tuple(before if t < at else after for t in range(duration))
    return Trace(name, rates, (float(at),), seed, f"{before:g}/s, then {after:g}/s from {at} s")


def step_x2(seed: int = 0, base: float = 1000.0, at: int = 300, duration: int = 1200) -> Trace:
    return _steady("step-x2", base, 2 * base, at, duration, seed)


def step_half(seed: int = 0, base: float = 2000.0, at: int = 300, duration: int = 1200) -> Trace:
    return _steady("step-x0.5", base, base / 2, at, duration, seed)


def step_x4(seed: int = 0, base: float = 500.0, at: int = 300, duration: int = 1200) -> Trace:
    return _steady("step-x4", base, 4 * base, at, duration, seed)


def step_x10(seed: int = 0, base: float = 300.0, at: int = 300, duration: int = 1200) -> Trace:
    return _steady("step-x10", base, 10 * base, at, duration, seed)


def spike(
    seed: int = 0,
    base: float = 500.0,
    factor: float = 10.0,
    at: int = 300,
    length: int = 60,
    duration: int = 1200,
) -> Trace:
    rates = tuple(base * factor if at <= t < at + length else base for t in range(duration))
    return Trace(
        "spike",
        rates,
        (float(at), float(at + length)),
        seed,
        f"{base:g}/s with {factor:g}× for {length} s at {at} s",
    )


def square(
    seed: int = 0, low: float = 400.0, high: float = 2000.0, period: int = 600, duration: int = 1800
) -> Trace:
    half = period // 2
    rates = tuple(high if (t // half) % 2 == 1 else low for t in range(duration))
    edges = tuple(float(t) for t in range(half, duration, half))
    return Trace("square", rates, edges, seed, f"{low:g}/s ↔ {high:g}/s every {half} s (period {period} s)")


def diurnal(
    seed: int = 0, mean: float = 1000.0, amplitude: float = 800.0, period: int = 1800, noise: float = 0.05
) -> Trace:
    rng = random.Random(seed)
    rates = []
    for t in range(period):
        clean = mean - amplitude * math.cos(2 * math.pi * t / period)  # night at 0, noon at period/2
        rates.append(max(0.0, clean * (1 + rng.gauss(0.0, noise))))
    return Trace(
        "diurnal",
        tuple(rates),
        (),
        seed,
        f"sine {mean - amplitude:g}–{mean + amplitude:g}/s, {noise:.0%} noise",
    )


def bursty(
    seed: int = 0,
    rate: float = 1500.0,
    on_mean: float = 30.0,
    gap_min: float = 10.0,
    alpha: float = 1.5,
    gap_max: float = 600.0,
    duration: int = 1800,
) -> Trace:
    """Bursts of exponential length (mean ``on_mean``) at ``rate``, separated by Pareto gaps."""
    rng = random.Random(seed)
    rates = [0.0] * duration
    starts = []
    t = int(rng.paretovariate(alpha) * gap_min)
    while t < duration:
        on = max(1, round(rng.expovariate(1 / on_mean)))
        starts.append(float(t))
        for s in range(t, min(duration, t + on)):
            rates[s] = rate
        t += on + max(1, round(min(gap_max, rng.paretovariate(alpha) * gap_min)))
    return Trace(
        "bursty",
        tuple(rates),
        tuple(starts),
        seed,
        f"{rate:g}/s bursts (mean {on_mean:g} s), Pareto gaps α={alpha:g}",
    )


def _every(rate: float, on: int, period: int, first: int, duration: int) -> tuple[list[float], list[float]]:
    """``on`` seconds at ``rate`` every ``period`` seconds from ``first``, nothing between: the
    rates and the seconds at which each burst starts."""
    rates = [0.0] * duration
    starts = []
    for t in range(first, duration, period):
        starts.append(float(t))
        for s in range(t, min(duration, t + on)):
            rates[s] = rate
    return rates, starts


def idle(
    seed: int = 0, rate: float = 800.0, burst: int = 60, gap: int = 600, first: int = 60, duration: int = 1800
) -> Trace:
    rates, starts = _every(rate, burst, burst + gap, first, duration)
    description = f"{burst} s at {rate:g}/s every {burst + gap} s, idle between"
    return Trace("idle", tuple(rates), tuple(starts), seed, description)


def waves(
    seed: int = 0,
    rate: float = 1800.0,
    on: int = 40,
    period: int = 110,
    first: int = 30,
    duration: int = 1800,
) -> Trace:
    rates, starts = _every(rate, on, period, first, duration)
    return Trace("waves", tuple(rates), tuple(starts), seed, f"{on} s at {rate:g}/s every {period} s")


TRACES: dict[str, Callable[..., Trace]] = {
    "step-x2": step_x2,
    "step-x0.5": step_half,
    "step-x4": step_x4,
    "step-x10": step_x10,
    "spike": spike,
    "square": square,
    "diurnal": diurnal,
    "bursty": bursty,
    "idle": idle,
    "waves": waves,
}


def make_trace(name: str, seed: int = 0) -> Trace:
    """The named trace for ``seed``; a ``ValueError`` names the choices for an unknown name."""
    try:
        factory = TRACES[name]
    except KeyError:
        raise ValueError(f"unknown trace {name!r}: choose one of {', '.join(TRACES)}") from None
    return factory(seed=seed)
