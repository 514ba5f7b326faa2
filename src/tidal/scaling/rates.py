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
from collections.abc import Mapping, Sequence
from typing import NamedTuple

__all__ = [
    "DEFAULT_CAPACITY",
    "MAX_LOOKBACK_SECONDS",
    "CounterWindow",
    "GaugeWindow",
    "adaptive_lookback",
]

DEFAULT_CAPACITY = 360  # Numaflow: 30 min of 5 s ticks
MAX_LOOKBACK_SECONDS = 600.0


def _start_index(timestamps: Sequence[float], now: float, lookback: float) -> int | None:
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


class _CounterSample(NamedTuple):
    """A plain tuple of floats: the garbage collector untracks those, which matters with
    thousands of windows alive (full collections otherwise walk every sample)."""

    timestamp: float
    total: float  # sum of every replica's counter at this tick
    processed: float  # running sum of increments up to and including this tick


class CounterWindow:
    """Cumulative per-replica counters sampled over time; gives a vertex's processing rate.

    Each tick's increment (over the replica's last seen count) is computed once, when recorded,
    and kept as a running sum, so ``rate()`` costs a binary search whatever the window length.

    >>> w = CounterWindow()
    >>> for t, c in [(0, 0), (1, 100), (2, 200), (3, 300)]:
    ...     w.record(t, {"pod-0": c})
    >>> w.rate(now=3, lookback=120)  # (200 − 0) / (2 − 0): the newest sample is left out
    100.0
    """

    __slots__ = ("_last_seen", "_processed", "_samples", "_timestamps")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be >= 2 samples, got {capacity}")
        self._samples: deque[_CounterSample] = deque(maxlen=capacity)
        self._timestamps: deque[float] = deque(maxlen=capacity)
        self._last_seen: dict[str, float] = {}
        self._processed = 0.0

    def __len__(self) -> int:
        return len(self._samples)

    def record(self, now: float, counts: Mapping[str, float]) -> None:
        """One tick's cumulative counters, by replica. A tick with no replica adds nothing.

        Samples must come in time order; a second call for the newest timestamp merges into it.
        """
        if not counts:
            return
        samples = self._samples
        merge = bool(samples) and samples[-1].timestamp == now
        if samples and now < samples[-1].timestamp:
            raise ValueError(f"samples must be recorded in time order: {now} < {samples[-1].timestamp}")
        increment = 0.0
        total = 0.0
        last_seen = self._last_seen
        for pod, current in counts.items():
            previous = last_seen.get(pod, 0.0)
            increment += current - previous if current >= previous else current
            last_seen[pod] = current
            total += current
        self._processed += increment
        if merge:
            old = samples.pop()
            self._timestamps.pop()
            total += old.total
        samples.append(_CounterSample(now, total, self._processed))
        self._timestamps.append(now)

    def timestamps(self) -> list[float]:
        return list(self._timestamps)

    def totals(self) -> list[tuple[float, float]]:
        """``(timestamp, sum of the replicas' counters)`` per sample."""
        return [(s.timestamp, s.total) for s in self._samples]

    def rate(self, now: float, lookback: float) -> float | None:
        """Messages per second over the lookback window, or ``None`` when not available."""
        start = _start_index(self._timestamps, now, lookback)
        if start is None:
            return None
        samples = self._samples
        first, last = samples[start], samples[len(samples) - 2]
        dt = last.timestamp - first.timestamp
        if dt <= 0:
            return None
        return (last.processed - first.processed) / dt


class GaugeWindow:
    """A gauge (pending messages) sampled over time; gives its mean over the lookback window.

    ``None`` or a negative sample means "not available" and is dropped. Running sums of the
    available samples make ``average()`` a binary search.
    """

    __slots__ = ("_count", "_samples", "_sum", "_timestamps")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be >= 2 samples, got {capacity}")
        # (timestamp, value, running sum before this sample, running count before this sample)
        self._samples: deque[tuple[float, float | None, int, int]] = deque(maxlen=capacity)
        self._timestamps: deque[float] = deque(maxlen=capacity)
        self._sum = 0
        self._count = 0

    def __len__(self) -> int:
        return len(self._samples)

    def record(self, now: float, value: float | None) -> None:
        samples = self._samples
        if samples and now < samples[-1][0]:
            raise ValueError(f"samples must be recorded in time order: {now} < {samples[-1][0]}")
        if value is not None and (value < 0 or math.isnan(value)):
            value = None
        if samples and samples[-1][0] == now:  # replace the newest sample
            _, _, before_sum, before_count = samples.pop()
            self._timestamps.pop()
            self._sum, self._count = before_sum, before_count
        before = (self._sum, self._count)
        if value is not None:
            self._sum += int(value)
            self._count += 1
        samples.append((now, value, *before))
        self._timestamps.append(now)

    def latest(self) -> float | None:
        return self._samples[-1][1] if self._samples else None

    def average(self, now: float, lookback: float) -> float | None:
        """Floored mean of the available samples in the window, or ``None`` when not available."""
        start = _start_index(self._timestamps, now, lookback)
        if start is None:
            return None
        _, _, sum_before, count_before = self._samples[start]
        count = self._count - count_before
        if count == 0:
            return None
        return float((self._sum - sum_before) // count)


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
