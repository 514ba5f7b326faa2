"""A vertex's read budget: Numaflow's rate limiter (``rust/numaflow-throttling``) as a pure
object; the time is an argument.

**The budget a second**, ``filled``, starts at ``rateLimit.min`` and moves when a new whole second
is first asked for tokens, by the spec's ``mode`` (Numaflow's rules):

- ``relaxed``: ``+ slope`` (once per second that asks, so the ramp pauses while nobody reads);
- ``scheduled``: ``+ slope × seconds since the last ask`` (the ramp follows the clock);
- ``onlyIfUsed``: ``+ slope`` only if the previous second used ``thresholdPercentage`` of its
  budget, else unchanged;
- ``goBackN``: after a gap longer than ``coolDownSeconds``, ``− rampDownPercentage × slope ×
  (gap − 1)``; else ``+ slope`` if used past the threshold, else ``− slope``;

always within ``[min, max]``; "used" is Numaflow's (what was taken over ``filled``, plus
``slope/filled``, its rounding allowance, in percent).

**What may be taken** is where Tidal differs on purpose: at most ``filled`` over any sliding second
(what was taken in the last second is remembered), not ``filled`` per wall-clock second. Numaflow
hands out a fresh budget at each whole second, so a window of ``n`` seconds that straddles ``n+1``
of them can let through ``(n+1)/n`` of the limit (10 % over in 10 s); a sliding second keeps any
window of ``n`` seconds at ``n × filled``, and a micro-batch that comes a second late can still
take a whole second's worth. Nothing unused carries over (Numaflow's rule too). The first second
starts at ``min`` (Numaflow's first ask compares the clock with an epoch of 0 and so starts one
step, or for ``scheduled`` the whole ramp, above it). ``pool`` multiplies the budget
(``store: perReplica``: each replica has its own).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["THROTTLED_RECENTLY", "RateLimit", "RateLimitMode", "Throttle", "ceiling"]

# A vertex whose rate limit held a micro-batch back this recently is bound by the limit, not by
# its replicas: the autoscaler does not scale it up (rule rate-limited).
THROTTLED_RECENTLY = 5.0


class RateLimitMode(StrEnum):
    RELAXED = "relaxed"  # grows one step in each second it is asked for tokens (Numaflow's default)
    SCHEDULED = "scheduled"  # grows with the clock, asked or not
    ONLY_IF_USED = "onlyIfUsed"  # grows only after a second that used thresholdPercentage of it
    GO_BACK_N = "goBackN"  # also shrinks: after an unused second, or a gap longer than coolDown


@dataclass(frozen=True)
class RateLimit:
    """A vertex's rate limit (validated by :class:`tidal.spec.rate_limit.RateLimitSpec`)."""

    max: float
    min: float = 1.0
    ramp_up_seconds: float = 1.0
    mode: RateLimitMode = RateLimitMode.RELAXED
    threshold_percentage: int = 50
    cool_down_seconds: float = 5.0
    ramp_down_percentage: int = 50

    @property
    def slope(self) -> float:
        """Messages a second the budget grows by each second of the ramp."""
        return (self.max - self.min) / self.ramp_up_seconds


class Throttle:
    def __init__(self, spec: RateLimit) -> None:
        self.spec = spec
        self.filled = spec.min
        self.epoch: int | None = None  # the whole second ``filled`` was last moved for
        self.used = 0.0  # taken in that second (per pool member)
        self._taken: deque[tuple[float, float]] = deque()  # (when, how many per member), last second

    def _step(self, epoch: int) -> None:
        """Move ``filled`` for a new whole second, by the mode."""
        spec, slope = self.spec, self.spec.slope
        if self.epoch is not None:
            gap = epoch - self.epoch
            used = self._used_percent()
            mode = spec.mode
            if mode == RateLimitMode.SCHEDULED:
                self.filled += slope * gap
            elif mode == RateLimitMode.RELAXED:
                self.filled += slope
            elif mode == RateLimitMode.ONLY_IF_USED:
                if used >= spec.threshold_percentage:
                    self.filled += slope
            elif gap > spec.cool_down_seconds:  # goBackN after a pause
                self.filled -= spec.ramp_down_percentage / 100 * slope * (gap - 1)
            elif used >= spec.threshold_percentage:
                self.filled += slope
            else:
                self.filled -= slope
            self.filled = min(max(self.filled, spec.min), spec.max)
        self.epoch = epoch
        self.used = 0.0

    def _used_percent(self) -> float:
        if self.filled <= 0:
            return 100.0
        used = round(self.used / self.filled * 100) + round(self.spec.slope / self.filled * 100)
        return float(min(max(used, 0), 100))

    def _recent(self, now: float) -> float:
        while self._taken and self._taken[0][0] <= now - 1.0:
            self._taken.popleft()
        return sum(n for _, n in self._taken)

    def acquire(self, now: float, wanted: int, pool: int = 1) -> int:
        """Up to ``wanted`` tokens at ``now``: what the last second left of ``filled``
        (``pool`` members' worth)."""
        epoch = math.floor(now)
        if self.epoch is None or epoch > self.epoch:
            self._step(epoch)
        pool = max(1, pool)
        left = max(0.0, math.floor(self.filled) - self._recent(now))
        given = max(0, min(wanted, math.floor(left * pool)))
        if given:
            self._taken.append((now, given / pool))
            self.used += given / pool
        return given

    def give_back(self, now: float, unused: int, pool: int = 1) -> None:
        """Tokens taken at ``now`` and not used (fewer messages than admitted)."""
        if unused <= 0 or not self._taken or self._taken[-1][0] != now:
            return
        back = min(unused / max(1, pool), self._taken[-1][1])
        self._taken[-1] = (now, self._taken[-1][1] - back)
        self.used -= back


def ceiling(spec: RateLimit, elapsed: float) -> float:
    """The most a second the limit lets through ``elapsed`` seconds after the vertex started
    reading, on the ramp (``min + slope × elapsed``, at most ``max``): what the autoscaler's
    rate-limit guard compares with (the fix to numaproj/numaflow #2976: a scale-up past what the
    ramp lets through adds nothing)."""
    return min(spec.max, spec.min + spec.slope * max(0.0, elapsed))
