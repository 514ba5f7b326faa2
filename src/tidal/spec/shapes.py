"""Load shapes for the ``generator`` source: messages per second as a function of time.

A shape is pure: ``rate(t)`` for the instantaneous rate and ``total(t)``, the number of messages
due by ``t`` seconds after the start, as a whole number. The generator emits
``total(t_now) − total(t_last)`` messages, so the count is deterministic, replays are exact, and
rounding never drifts. ``total`` is the integral of ``rate``, closed-form where possible, so a
long run does not sum floats. The simulator (issue #7) uses the same shapes.

| shape | parameters | rate(t) |
|---|---|---|
| constant | rate | rate |
| step | rate, peak, at | rate before ``at``, peak after |
| ramp | rate, peak, at, duration | linear from rate to peak over [at, at + duration], then peak |
| sine | rate, peak, period | oscillates between rate and peak, starting at rate |
| square | rate, peak, period, at | peak in the first half of every period, rate in the second |
| bursty | rate, peak, period, duration, at | peak for ``duration`` at the start of every period |

For ``square`` and ``bursty``, ``at`` delays the pattern: ``rate`` until ``at``, then the periods
(0, the default, starts with the first period at once). A step up and back down is ``bursty``
with ``at`` the step and ``duration`` its length, and a ``period`` longer than the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["LoadShape", "Shape"]


class Shape(StrEnum):
    CONSTANT = "constant"
    STEP = "step"
    RAMP = "ramp"
    SINE = "sine"
    SQUARE = "square"
    BURSTY = "bursty"


@dataclass(frozen=True, slots=True)
class LoadShape:
    """Rate over time. ``rate`` is the base (messages/s); ``peak`` the high level where used."""

    shape: Shape = Shape.CONSTANT
    rate: float = 100.0
    peak: float = 0.0
    at: float = 0.0
    duration: float = 0.0
    period: float = 60.0

    def rate_at(self, t: float) -> float:
        """Messages per second at ``t`` seconds after the start (``t < 0`` → 0)."""
        if t < 0:
            return 0.0
        base, peak = self.rate, self.peak
        match self.shape:
            case Shape.CONSTANT:
                return base
            case Shape.STEP:
                return base if t < self.at else peak
            case Shape.RAMP:
                if t < self.at:
                    return base
                if self.duration <= 0 or t >= self.at + self.duration:
                    return peak
                return base + (peak - base) * (t - self.at) / self.duration
            case Shape.SINE:
                return base + (peak - base) * (1 - math.cos(2 * math.pi * t / self.period)) / 2
            case Shape.SQUARE:
                return (
                    base if t < self.at else peak if ((t - self.at) % self.period) < self.period / 2 else base
                )
            case Shape.BURSTY:
                return (
                    base if t < self.at else peak if ((t - self.at) % self.period) < self.duration else base
                )
        raise AssertionError(self.shape)

    def integral(self, t: float) -> float:
        """Messages due by ``t`` (the exact integral of :meth:`rate_at` from 0)."""
        if t <= 0:
            return 0.0
        base, peak = self.rate, self.peak
        match self.shape:
            case Shape.CONSTANT:
                return base * t
            case Shape.STEP:
                return base * min(t, self.at) + peak * max(0.0, t - self.at)
            case Shape.RAMP:
                before = base * min(t, self.at)
                if t <= self.at:
                    return before
                ramp_t = min(t - self.at, max(self.duration, 0.0))
                ramp = 0.0
                if self.duration > 0:
                    ramp = base * ramp_t + (peak - base) * ramp_t * ramp_t / (2 * self.duration)
                after = peak * max(0.0, t - self.at - max(self.duration, 0.0))
                return before + ramp + after
            case Shape.SINE:
                w = 2 * math.pi / self.period
                return base * t + (peak - base) / 2 * (t - math.sin(w * t) / w)
            case Shape.SQUARE:
                return base * min(t, self.at) + self._periodic(t - self.at, self.period / 2)
            case Shape.BURSTY:
                return base * min(t, self.at) + self._periodic(t - self.at, min(self.duration, self.period))
        raise AssertionError(self.shape)

    def _periodic(self, t: float, high: float) -> float:
        """Integral of ``peak`` for the first ``high`` seconds of every period, ``rate`` after
        (0 for ``t <= 0``)."""
        if t <= 0:
            return 0.0
        per_period = self.peak * high + self.rate * (self.period - high)
        full, rest = divmod(t, self.period)
        return full * per_period + self.peak * min(rest, high) + self.rate * max(0.0, rest - high)

    def total(self, t: float) -> int:
        """Whole messages due by ``t``: ``floor`` of the integral (never decreasing)."""
        return math.floor(self.integral(t) + 1e-9)

    def due_at(self, n: float) -> float:
        """When message ``n`` falls due: the first ``t`` with ``integral(t) >= n`` (to a
        microsecond), the generator's source time for it; ``inf`` if the shape never gets there."""
        if n <= 0:
            return 0.0
        hi = 1.0
        while self.integral(hi) < n:
            hi *= 2
            if hi > 1e12:
                return math.inf
        lo = 0.0
        while hi - lo > 1e-6:
            mid = (lo + hi) / 2
            if self.integral(mid) >= n - 1e-9:
                hi = mid
            else:
                lo = mid
        return hi
