"""Time-bucketed window averages: Knative's ``pkg/autoscaler/aggregation``.

Values are recorded into fixed-width time buckets (1 s by default) held in a ring that spans one
window. The average follows Knative exactly (``spec/knative.md`` §2):

* a value at a bucket already written is added to it; several values in one second are summed;
* a value a whole window older than the last write is dropped;
* a write after a gap zero-fills the skipped buckets (inner gaps count as zeros); a gap of a whole
  window or more resets the window, so a revision waking from idle gets undiluted averages;
* the average divides by the buckets written since the first write (a partial window at the start)
  and excludes trailing seconds with no data; it is 0 once a whole window passed without data;
* results are rounded to 6 decimals, half away from zero.

Every method takes ``now`` in seconds (a ``float``); nothing here reads a clock.

Deliberate difference: upstream ``ResizeWindow`` reads the wall clock to decide whether the old
data is still recent; here the caller passes ``now``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

__all__ = [
    "MaxTimeWindow",
    "TimedBuckets",
    "WeightedBuckets",
    "round_half_away",
    "smoothing_coefficient",
]

_PRECISION = 6


def round_half_away(value: float, digits: int = 0) -> float:
    """Round like Go's ``math.Round``: halves go away from zero (2.5 → 3, -2.5 → -3)."""
    scale = 10.0**digits
    scaled = abs(value) * scale
    rounded = math.floor(scaled + 0.5)
    return math.copysign(rounded / scale, value)


class TimedBuckets:
    """Knative's ``TimedFloat64Buckets``: a linear window average over time buckets.

    >>> b = TimedBuckets(window=5.0)
    >>> for i, v in enumerate([1, 2, 3, 4, 5]):
    ...     b.record(100.0 + i, v)
    >>> b.window_average(104.0)
    3.0
    >>> b.window_average(106.0)  # two trailing seconds without data are excluded
    4.0
    """

    __slots__ = ("_buckets", "_first", "_granularity", "_last", "_total", "_window")

    def __init__(self, window: float, granularity: float = 1.0) -> None:
        if granularity <= 0:
            raise ValueError(f"granularity must be > 0 seconds, got {granularity}")
        if window < granularity:
            raise ValueError(f"window {window} s must be at least one bucket of {granularity} s")
        self._granularity = float(granularity)
        self._window = float(window)
        self._buckets = [0.0] * math.ceil(window / granularity)
        self._first: int | None = None  # bucket index of the first write (unset: None)
        self._last: int | None = None  # bucket index of the last write
        self._total = 0.0

    # -- helpers -------------------------------------------------------------------------------

    def _index(self, t: float) -> int:
        """The absolute bucket index of time ``t`` (Unix-aligned, like Knative)."""
        return math.floor(t / self._granularity)

    @property
    def window(self) -> float:
        return self._window

    @property
    def size(self) -> int:
        """Number of buckets in the ring."""
        return len(self._buckets)

    @property
    def window_total(self) -> float:
        return self._total

    # -- writes --------------------------------------------------------------------------------

    def record(self, now: float, value: float) -> None:
        """Add ``value`` to the bucket of time ``now``."""
        b = self._index(now)
        n = len(self._buckets)
        window_idx = self._window / self._granularity
        last = self._last
        if last is not None and b != last and b + window_idx <= last:
            return  # at least a full window older than the last write: dropped
        if last is None or b != last:
            if self._first is None or self._first > b:
                self._first = b
            if last is None or b > last:
                if last is not None and b - last >= window_idx:
                    self._buckets = [0.0] * n
                    self._total = 0.0
                    self._first = b
                elif last is not None:
                    for i in range(last + 1, b + 1):
                        slot = i % n
                        self._total -= self._buckets[slot]
                        self._buckets[slot] = 0.0
                self._last = b
        self._buckets[b % n] += value
        self._total += value

    def resize(self, now: float, window: float) -> None:
        """Change the window length, keeping the newest buckets that fit (Knative ``ResizeWindow``)."""
        if window == self._window:
            return
        new_n = math.ceil(window / self._granularity)
        if new_n < 1:
            raise ValueError(f"window {window} s must be at least one bucket")
        new = [0.0] * new_n
        total = 0.0
        old_n = len(self._buckets)
        if self._last is not None and self._index(now) - self._last <= self._window / self._granularity:
            idx = self._last
            for _ in range(min(new_n, old_n)):
                value = self._buckets[idx % old_n]
                new[idx % new_n] = value
                total += value
                idx -= 1
            self._first = self._last - (old_n - 1)
        else:
            self._first = None
        self._window = float(window)
        self._buckets = new
        self._total = total

    # -- reads ---------------------------------------------------------------------------------

    def is_empty(self, now: float) -> bool:
        """True when nothing was written within the last window."""
        if self._last is None:
            return True
        return (self._index(now) - self._last) * self._granularity > self._window

    def window_average(self, now: float) -> float:
        """The average per bucket over the window ending at ``now`` (see the module docstring)."""
        if self._last is None or self._first is None:
            return 0.0
        now_idx = self._index(now)
        n = len(self._buckets)
        span = self._last - self._first + 1
        d = now_idx - self._last
        if d <= 0:
            return round_half_away(self._total / min(span, n), _PRECISION)
        if d * self._granularity < self._window:
            total = self._total
            for i in range(self._last + 1, now_idx + 1):
                total -= self._buckets[i % n]
            denominator = min(span, n - d)
            return round_half_away(total / denominator, _PRECISION)
        return 0.0


def smoothing_coefficient(buckets: int) -> float:
    """Knative's weight for the exponential window: ``max(1 − 0.0001^(1/N), 0.2)``."""
    return max(1.0 - math.pow(1.0 - 0.9999, 1.0 / buckets), 0.2)


class WeightedBuckets(TimedBuckets):
    """Knative's ``WeightedFloat64Buckets`` (``metric-aggregation-algorithm: weighted-exponential``).

    Newer seconds weigh more: ``Σ bucket[last − i] · m · (1 − m)^(i + z)`` where ``z`` counts the
    seconds since the last write. Like upstream, there is no normalisation by the weight sum, no
    partial-window handling and no rounding.
    """

    __slots__ = ("_smoothing",)

    def __init__(self, window: float, granularity: float = 1.0) -> None:
        super().__init__(window, granularity)
        self._smoothing = smoothing_coefficient(self.size)

    @property
    def smoothing(self) -> float:
        return self._smoothing

    def resize(self, now: float, window: float) -> None:
        super().resize(now, window)
        self._smoothing = smoothing_coefficient(self.size)

    def window_average(self, now: float) -> float:
        if self._last is None or self.is_empty(now):
            return 0.0
        n = len(self._buckets)
        m = self._smoothing
        multiplier = m
        count = n
        now_idx = self._index(now)
        if now_idx > self._last:
            zeros = now_idx - self._last
            multiplier *= (1.0 - m) ** zeros
            count -= zeros
        result = 0.0
        for i in range(max(count, 0)):
            result += self._buckets[(self._last - i) % n] * multiplier
            multiplier *= 1.0 - m
        return result


@dataclass(frozen=True, slots=True)
class _Entry:
    index: int
    value: float


class MaxTimeWindow:
    """The maximum of the values recorded over the last ``duration`` seconds (Knative ``max.TimeWindow``).

    Used for the KPA's scale-down delay: a monotonic deque ("ascending minima", mirrored) whose
    capacity is ``ceil(duration / granularity)`` slots; granularity is the decider tick, 2 s.
    A value stops counting at the first record whose slot is ``capacity`` slots later.
    """

    __slots__ = ("_capacity", "_entries", "_granularity")

    def __init__(self, duration: float, granularity: float = 2.0) -> None:
        if duration <= 0:
            raise ValueError(f"duration must be > 0 seconds, got {duration}")
        self._granularity = granularity
        self._capacity = math.ceil(duration / granularity)
        self._entries: deque[_Entry] = deque()

    @property
    def capacity(self) -> int:
        return self._capacity

    def record(self, now: float, value: float) -> None:
        index = int(now // self._granularity)
        entries = self._entries
        while entries and value >= entries[-1].value:
            entries.pop()
        while entries and index - entries[0].index >= self._capacity:
            entries.popleft()
        if entries and entries[-1].index == index:
            value = max(value, entries.pop().value)
        entries.append(_Entry(index, value))

    def current(self) -> float:
        """The window's maximum as of the last record (0 when nothing was recorded)."""
        return self._entries[0].value if self._entries else 0.0
