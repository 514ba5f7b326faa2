"""Processing rate and pending over the lookback window: Numaflow's daemon rater.

Numaflow scrapes every pod's cumulative read counter and the pending gauge on a fixed tick, keeps
the samples in a ring, and computes over the vertex's lookback window (``spec/numaflow.md`` §3.3):

* **rate** = the counter increase between the oldest sample in the window and the *second newest*
  sample (the newest may be incomplete), divided by the seconds between them. A counter that goes
  down is a restart: its whole new value counts as the increase. Fewer than two samples, or none
  old enough, means "not available" (``None``).
* **pending** = the mean of the pending samples in the window, newest included, floored to an
  integer like upstream's integer division.
* **adaptive lookback** stretches the window when a vertex processes in bursts, so a slow UDF is
  not judged idle between two of its outputs (§3.4).

Deliberate differences from upstream (``docs/scaling.md`` lists them all):

* A pod that misses a scrape and comes back contributes ``count − last count seen`` instead of its
  whole cumulative counter (upstream treats it as new: a rate spike). A pod seen for the first time
  still contributes its whole counter: it started from zero, so that is what it processed.
* An unavailable pending sample (negative, or the source's ``pending()`` raised) is dropped before
  averaging, as the Go runtime and the UDSource design (seed 002) do; the Rust runtime averages the
  ``-1`` in, which biases the mean low.
* The adaptive lookback is computed per vertex; upstream's loop stops for every vertex after the
  first one with too few samples.

All methods take ``now`` in seconds; nothing here reads a clock.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_CAPACITY",
    "MAX_LOOKBACK_SECONDS",
    "CounterWindow",
    "GaugeWindow",
    "adaptive_lookback",
]

DEFAULT_CAPACITY = 360  # Numaflow: 30 min of 5 s ticks
MAX_LOOKBACK_SECONDS = 600.0


def _start_index(timestamps: list[float], now: float, lookback: float) -> int | None:
    """Numaflow ``findStartIndex``: the first sample at or after ``now − lookback``.

    ``None`` when there are fewer than two samples or the second newest is already too old.
    Only indexes up to ``n − 2`` are considered, so at least two samples are in range.
    """
    n = len(timestamps)
    if n < 2:
        return None
    cutoff = now - lookback
    if timestamps[n - 2] < cutoff:
        return None
    return bisect.bisect_left(timestamps, cutoff, 0, n - 2)


@dataclass(slots=True)
class _CounterSample:
    timestamp: float
    counts: dict[str, float] = field(default_factory=dict)


class CounterWindow:
    """Cumulative per-replica counters sampled over time; gives a vertex's processing rate.

    >>> w = CounterWindow()
    >>> for t, c in [(0, 0), (1, 100), (2, 200), (3, 300)]:
    ...     w.record(t, {"pod-0": c})
    >>> w.rate(now=3, lookback=120)  # (200 − 0) / (2 − 0): the newest sample is left out
    100.0
    """

    __slots__ = ("_samples",)

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be >= 2 samples, got {capacity}")
        self._samples: deque[_CounterSample] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._samples)

    def record(self, now: float, counts: Mapping[str, float]) -> None:
        """One tick's cumulative counters, by replica. A tick with no replica adds nothing.

        Samples must come in time order; a sample at the newest timestamp merges into it.
        """
        if not counts:
            return
        samples = self._samples
        if samples and now < samples[-1].timestamp:
            raise ValueError(f"samples must be recorded in time order: {now} < {samples[-1].timestamp}")
        if samples and samples[-1].timestamp == now:
            samples[-1].counts.update(counts)
        else:
            samples.append(_CounterSample(now, dict(counts)))

    def timestamps(self) -> list[float]:
        return [s.timestamp for s in self._samples]

    def totals(self) -> list[tuple[float, float]]:
        """``(timestamp, sum of every replica's counter)`` per sample."""
        return [(s.timestamp, sum(s.counts.values())) for s in self._samples]

    def rate(self, now: float, lookback: float) -> float | None:
        """Messages per second over the lookback window, or ``None`` when not available."""
        samples = list(self._samples)
        timestamps = [s.timestamp for s in samples]
        start = _start_index(timestamps, now, lookback)
        if start is None:
            return None
        end = len(samples) - 2
        dt = timestamps[end] - timestamps[start]
        if dt <= 0:
            return None
        last_seen: dict[str, float] = {}
        for sample in samples[: start + 1]:
            last_seen.update(sample.counts)
        total = 0.0
        for i in range(start, end):
            for pod, current in samples[i + 1].counts.items():
                previous = last_seen.get(pod, 0.0)
                total += current - previous if current >= previous else current
                last_seen[pod] = current
        return total / dt


class GaugeWindow:
    """A gauge (pending messages) sampled over time; gives its mean over the lookback window.

    ``None`` or a negative sample means "not available" and is dropped.
    """

    __slots__ = ("_samples",)

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be >= 2 samples, got {capacity}")
        self._samples: deque[tuple[float, float | None]] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._samples)

    def record(self, now: float, value: float | None) -> None:
        samples = self._samples
        if samples and now < samples[-1][0]:
            raise ValueError(f"samples must be recorded in time order: {now} < {samples[-1][0]}")
        if value is not None and (value < 0 or math.isnan(value)):
            value = None
        if samples and samples[-1][0] == now:
            samples[-1] = (now, value)
        else:
            samples.append((now, value))

    def latest(self) -> float | None:
        return self._samples[-1][1] if self._samples else None

    def average(self, now: float, lookback: float) -> float | None:
        """Floored mean of the available samples in the window, or ``None`` when not available."""
        samples = list(self._samples)
        start = _start_index([t for t, _ in samples], now, lookback)
        if start is None:
            return None
        values = [int(v) for _, v in samples[start:] if v is not None]
        if not values:
            return None
        return float(sum(values) // len(values))


def adaptive_lookback(
    counts: CounterWindow,
    now: float,
    current: float,
    configured: float,
    maximum: float = MAX_LOOKBACK_SECONDS,
) -> float:
    """Numaflow's dynamic lookback (§3.4): stretch the window to cover the longest quiet spell.

    Over the last ``3 × current`` seconds (newest sample excluded), find the longest interval in
    which the summed counter did not increase (a decrease starts a new baseline; a trailing quiet
    run counts only when the counter is non-zero), round it up to a whole minute, and then grow to
    at most ``maximum`` or shrink to no less than the configured lookback.

    An interval is measured from the sample where the count last changed to the sample where it
    next increases. With fewer than two samples the current lookback is kept.
    """
    totals = counts.totals()
    timestamps = [t for t, _ in totals]
    start = _start_index(timestamps, now, 3.0 * current)
    if start is None:
        return current
    end = len(totals) - 2
    longest = 0.0
    since, value = totals[start]
    for t, c in totals[start + 1 : end + 1]:
        if c > value:
            longest = max(longest, t - since)
            since, value = t, c
        elif c < value:
            since, value = t, c
    if value > 0:
        longest = max(longest, totals[end][0] - since)
    result = math.ceil(longest / 60.0) * 60.0
    if result > current:
        return min(result, maximum)
    return max(result, configured)
