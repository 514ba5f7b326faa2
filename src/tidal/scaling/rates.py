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
  not judged idle between two of its outputs (§3.4): :mod:`tidal.scaling.lookback`, over the
  series a :class:`Rater` keeps.

Deliberate differences from upstream (``docs/scaling.md`` lists them all):

* A pod that misses a scrape and comes back contributes ``count − last count seen`` instead of its
  whole cumulative counter (upstream treats it as new: a rate spike). A pod seen for the first time
  still contributes its whole counter: it started from zero, so that is what it processed.
* An unavailable pending sample (negative, or the source's ``pending()`` raised) is dropped before
  averaging, as the Go runtime and the UDSource design (seed 002) do; the Rust runtime averages the
  ``-1`` in, which biases the mean low.
* The adaptive lookback is computed per vertex; upstream's loop stops for every vertex after the
  first one with too few samples.
* An idle vertex's trailing quiet run does not stretch its lookback (``adaptive_lookback(...,
  idle=True)``): upstream's does, until the window takes in the old backlog again.
* The controller rounds a quiet spell up to ``min(60 s, lookbackSeconds)``, not always a whole
  minute, so a lookback under a minute keeps its meaning (``granularity``).

All methods take ``now`` in seconds; nothing here reads a clock.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Mapping

__all__ = [
    "DEFAULT_CAPACITY",
    "MAX_LOOKBACK_SECONDS",
    "CounterWindow",
    "GaugeWindow",
    "Rater",
]

DEFAULT_CAPACITY = 360  # Numaflow: 30 min of 5 s ticks
MAX_LOOKBACK_SECONDS = 600.0


class _Series:
    """Samples as parallel columns of C doubles, oldest first, holding at most ``capacity`` rows.

    ``array('d')`` rather than a deque of tuples: the arrays are invisible to the garbage
    collector. With 10,000 vertices × 360 samples alive, every full collection used to visit
    each sample (~100 ms a pass, measured with ``tidal bench scaling``). Old rows are dropped
    by moving ``_start``; the arrays are compacted once half of them is dead (amortized O(1)).
    Column 0 is always the timestamp.
    """

    __slots__ = ("_capacity", "_columns", "_cursor", "_start", "_ts")

    def __init__(self, capacity: int, width: int) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be >= 2 samples, got {capacity}")
        self._capacity = capacity
        self._columns = tuple(array("d") for _ in range(width))
        self._ts = self._columns[0]
        self._start = 0
        self._cursor = 0  # the last start index found: windows slide, so the next is near

    def __len__(self) -> int:
        return len(self._ts) - self._start

    def _newest_time(self, now: float) -> float | None:
        """The newest timestamp (``None`` when empty); refuses ``now`` older than it."""
        ts = self._ts
        if len(ts) == self._start:
            return None
        newest = ts[-1]
        if now < newest:
            raise ValueError(f"samples must be recorded in time order: {now} < {newest}")
        return newest

    def _drop_oldest(self) -> None:
        """Called once an append passed capacity; compacts the columns when half of them is dead."""
        self._start += 1
        if self._start >= self._capacity:
            for column in self._columns:
                del column[: self._start]
            self._start = 0
            self._cursor = 0

    def _start_index(self, now: float, lookback: float) -> int | None:
        """Numaflow ``findStartIndex``: the first sample at or after ``now − lookback``.

        ``None`` when there are fewer than two samples or the second newest is already too old.
        Only indexes up to ``n − 2`` are considered, so at least two samples are in range.
        The index is absolute (into the columns).
        """
        ts = self._ts
        n = len(ts)
        if n - self._start < 2:
            return None
        cutoff = now - lookback
        hi = n - 2
        if ts[hi] < cutoff:
            return None
        lo = self._start
        i = self._cursor
        # From one tick to the next the window start moves a sample or two: walk from the last
        # answer when everything before it is still too old, else binary search. (On array('d')
        # every probe boxes a float; this halves the cost of rate() at 10,000 vertices.)
        if lo <= i <= hi and (i == lo or ts[i - 1] < cutoff):
            for _ in range(4):
                if ts[i] >= cutoff:
                    break
                i += 1
            else:
                i = bisect.bisect_left(ts, cutoff, i, hi)
        else:
            i = bisect.bisect_left(ts, cutoff, lo, hi)
        self._cursor = i
        return i


class CounterWindow(_Series):
    """Cumulative per-replica counters sampled over time; gives a vertex's processing rate.

    Each tick's increment (over the replica's last seen count) is computed once, when recorded,
    and kept as a running sum, so ``rate()`` costs a binary search whatever the window length.

    >>> w = CounterWindow()
    >>> for t, c in [(0, 0), (1, 100), (2, 200), (3, 300)]:
    ...     w.record(t, {"pod-0": c})
    >>> w.rate(now=3, lookback=120)  # (200 − 0) / (2 − 0): the newest sample is left out
    100.0
    """

    __slots__ = ("_last_seen", "_processed", "_processed_col", "_totals")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        # Columns: timestamp, total (sum of the replicas' counters at that tick), processed
        # (running sum of increments up to and including that tick).
        super().__init__(capacity, 3)
        _, self._totals, self._processed_col = self._columns
        self._last_seen: dict[str, float] = {}
        self._processed = 0.0

    def record(self, now: float, counts: Mapping[str, float]) -> None:
        """One tick's cumulative counters, by replica. A tick with no replica adds nothing.

        Samples must come in time order; a second call for the newest timestamp merges into it.
        """
        if not counts:
            return
        newest = self._newest_time(now)
        increment, total = _increment(self._last_seen, counts)
        processed = self._processed + increment
        self._processed = processed
        if newest == now:  # merge into the newest sample
            self._ts[-1] = now
            self._totals[-1] += total
            self._processed_col[-1] = processed
            return
        self._ts.append(now)
        self._totals.append(total)
        self._processed_col.append(processed)
        if len(self._ts) - self._start > self._capacity:
            self._drop_oldest()

    def timestamps(self) -> list[float]:
        return list(self._ts[self._start :])

    def totals(self) -> list[tuple[float, float]]:
        """``(timestamp, sum of the replicas' counters)`` per sample."""
        start = self._start
        return list(zip(self._ts[start:], self._totals[start:], strict=True))

    def rate(self, now: float, lookback: float) -> float | None:
        """Messages per second over the lookback window, or ``None`` when not available."""
        start = self._start_index(now, lookback)
        if start is None:
            return None
        ts = self._ts
        last = len(ts) - 2
        dt = ts[last] - ts[start]
        if dt <= 0:
            return None
        processed = self._processed_col
        return (processed[last] - processed[start]) / dt


class _PendingSeries(_Series):
    """The pending half shared by :class:`GaugeWindow` and :class:`Rater`.

    Columns 0–3: timestamp, value (NaN = not available), and the running sum and count of the
    available samples *before* this row; subclasses may add columns after them.
    """

    __slots__ = ("_count", "_counts", "_sum", "_sums", "_values")

    def __init__(self, capacity: int, extra_columns: int = 0) -> None:
        super().__init__(capacity, 4 + extra_columns)
        _, self._values, self._sums, self._counts = self._columns[:4]
        self._sum = 0
        self._count = 0

    def _forget_newest_if_at(self, now: float) -> None:
        """A second sample for the newest timestamp replaces it: undo the newest row."""
        if self._newest_time(now) == now:
            self._sum, self._count = int(self._sums[-1]), int(self._counts[-1])
            for column in self._columns:
                column.pop()

    def _append_pending(self, now: float, value: float | None) -> None:
        total, count = self._sum, self._count
        self._ts.append(now)
        self._sums.append(total)
        self._counts.append(count)
        if value is None or value < 0 or math.isnan(value):
            self._values.append(_NAN)
        else:
            self._values.append(value)
            self._sum = total + int(value)
            self._count = count + 1

    def _average_from(self, start: int) -> float | None:
        count = self._count - int(self._counts[start])
        if count == 0:
            return None
        return float((self._sum - int(self._sums[start])) // count)

    def latest(self) -> float | None:
        if len(self._values) == self._start:
            return None
        value = self._values[-1]
        return None if math.isnan(value) else value


class GaugeWindow(_PendingSeries):
    """A gauge (pending messages) sampled over time; gives its mean over the lookback window.

    ``None`` or a negative sample means "not available" and is dropped. Running sums of the
    available samples make ``average()`` a binary search.
    """

    __slots__ = ()

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        super().__init__(capacity)

    def record(self, now: float, value: float | None) -> None:
        self._forget_newest_if_at(now)
        self._append_pending(now, value)
        if len(self._ts) - self._start > self._capacity:
            self._drop_oldest()

    def average(self, now: float, lookback: float) -> float | None:
        """Floored mean of the available samples in the window, or ``None`` when not available."""
        start = self._start_index(now, lookback)
        return None if start is None else self._average_from(start)


def _increment(last_seen: dict[str, float], counts: Mapping[str, float]) -> tuple[float, float]:
    """This tick's processed messages over all replicas, and the sum of their counters.

    A counter below the replica's last seen value was reset (a restart): its whole value counts.
    ``last_seen`` is updated in place.
    """
    increment = 0.0
    total = 0.0
    get = last_seen.get
    for pod, current in counts.items():
        previous = get(pod, 0.0)
        increment += current - previous if current >= previous else current
        last_seen[pod] = current
        total += current
    return increment, total


class Rater(_PendingSeries):
    """One partition's read counters *and* pending on a single timeline: Numaflow's rater.

    Equivalent to a :class:`CounterWindow` plus a :class:`GaugeWindow` recorded at the same
    ticks, at about half the cost: one timestamp column, one start-index search per query. The
    controller records every partition every tick, so this is the layout it uses (10,000
    vertices per tick in ``tidal bench scaling``).

    A tick without counters (no replica running) counts as nothing processed.

    >>> r = Rater()
    >>> for t in range(4):
    ...     r.record(t, {"pod-0": 100.0 * t}, pending=1000 - 100 * t)
    >>> r.metrics(now=3, lookback=120)  # rate (200 − 0) / 2; pending mean of 1000, 900, 800, 700
    (100.0, 850.0)
    """

    __slots__ = ("_last_seen", "_processed", "_processed_col", "_series")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        # Column 4 after the pending ones: processed, the running sum of increments up to and
        # including this tick.
        super().__init__(capacity, extra_columns=1)
        self._processed_col = self._columns[4]
        self._last_seen: dict[str, float] = {}
        self._processed = 0.0
        # Each series' counter per row (NaN: not there that tick), once more than one series was
        # recorded: the adaptive lookback is a per-series maximum. Columns of C doubles, aligned
        # with the timestamps, so 10,000 vertices' history stays invisible to the collector.
        self._series: dict[str, array[float]] | None = None

    def record(self, now: float, counts: Mapping[str, float], pending: float | None) -> None:
        """One tick: every replica's cumulative read counter, and the partition's pending.

        A second call for the newest timestamp merges the counters and replaces the pending.
        """
        series = self._series
        if series is not None and self._newest_time(now) == now:
            for column in series.values():
                column.pop()
        self._forget_newest_if_at(now)
        if counts:
            increment, _ = _increment(self._last_seen, counts)
            self._processed += increment
        self._append_pending(now, pending)
        self._processed_col.append(self._processed)
        if series is None and len(counts) > 1:
            series = self._series = {}
        if series is not None:
            self._record_series(series, counts)
        if len(self._ts) - self._start > self._capacity:
            if series is not None and self._start + 1 >= self._capacity:  # compacted with the rest
                for column in series.values():
                    del column[: self._start + 1]
            self._drop_oldest()

    def _record_series(self, series: dict[str, array[float]], counts: Mapping[str, float]) -> None:
        rows = len(self._ts)
        for key, value in counts.items():
            column = series.get(key)
            if column is None:
                column = series[key] = array("d", [_NAN]) * (rows - 1)
            column.append(value)
        if len(series) != len(counts):  # a series missing this tick: NaN in its column
            for column in series.values():
                if len(column) < rows:
                    column.append(_NAN)

    def timeline(self, start: int) -> list[tuple[float, Mapping[str, float]]]:
        """``(timestamp, counters by series)`` from absolute row ``start``: each series recorded
        when there were several, else the one series ``processed``."""
        ts, series = self._ts, self._series
        if series is None:
            processed = self._processed_col
            return [(ts[i], {"processed": processed[i]}) for i in range(start, len(ts))]
        return [
            (ts[i], {k: c[i] for k, c in series.items() if not math.isnan(c[i])})
            for i in range(start, len(ts))
        ]

    def metrics(self, now: float, lookback: float) -> tuple[float | None, float | None]:
        """``(rate, pending)`` over the lookback: as ``CounterWindow.rate`` and ``GaugeWindow.average``."""
        start = self._start_index(now, lookback)
        if start is None:
            return None, None
        ts = self._ts
        last = len(ts) - 2
        dt = ts[last] - ts[start]
        processed = self._processed_col
        rate = (processed[last] - processed[start]) / dt if dt > 0 else None
        return rate, self._average_from(start)

    def rate(self, now: float, lookback: float) -> float | None:
        return self.metrics(now, lookback)[0]

    def pending(self, now: float, lookback: float) -> float | None:
        return self.metrics(now, lookback)[1]

    def latest_pending(self) -> float | None:
        return self.latest()

    def totals(self) -> list[tuple[float, float]]:
        """``(timestamp, cumulative processed)`` per sample: what :func:`adaptive_lookback` reads."""
        start = self._start
        return list(zip(self._ts[start:], self._processed_col[start:], strict=True))


_NAN = math.nan
