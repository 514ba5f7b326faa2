"""Delivery delay: how long messages took from their source to their sink, summarised cheaply.

Every message carries its **source time** (``t``, seconds since the epoch) through the buffers:
when the generator made it due, the Kafka record's timestamp, when a user source's message was
staged or an HTTP request was received. A sink's writer task turns the source times of what it
wrote into a :class:`TimeSample` (the count and 101 evenly spaced order statistics, so a sample
is the same size for 10 messages or 500,000), and the commit, the moment the batch is
delivered, turns the samples of its tasks into delays (:func:`delays_at`).

Pooling samples weighted by their counts gives quantiles over any window (:func:`pooled`), and
the same points fill a Prometheus histogram (:data:`BUCKETS`). Quantiles of a pooled sample are
exact at the points a sample keeps and interpolated between them: within 1 % of rank of the true
value, which is what a p50/p99 panel needs.

Pure: time is an argument.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BUCKETS",
    "POINTS",
    "DelaySample",
    "TimeSample",
    "bucket_counts",
    "delays_at",
    "pooled",
    "quantile",
    "time_sample",
]

POINTS = 101  # order statistics per sample: every percentile, min and max included
# Upper bounds (seconds) of the delivery-delay histogram, Prometheus' ``le``; +Inf is implied.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclass(frozen=True, slots=True)
class TimeSample:
    """``count`` messages' source times as ``POINTS`` order statistics (ascending); empty for none."""

    count: int
    points: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class DelaySample:
    """``count`` messages' delays (seconds) as order statistics (ascending), at ``at``."""

    at: float
    count: int
    points: tuple[float, ...]

    @property
    def p50(self) -> float:
        return quantile([self], 0.5)

    @property
    def p99(self) -> float:
        return quantile([self], 0.99)

    @property
    def max(self) -> float:
        return self.points[-1] if self.points else math.nan


def time_sample(times: Any) -> TimeSample:
    """The sample of ``times`` (a sequence or an array, unsorted; NaN, a time nobody recorded,
    left out): its order statistics at every percentile, linearly interpolated between ranks."""
    import numpy as np

    values = np.asarray(times, dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return TimeSample(0, ())
    points = np.quantile(values, np.linspace(0.0, 1.0, POINTS))
    return TimeSample(int(values.size), tuple(float(p) for p in points))


def delays_at(samples: Iterable[TimeSample], now: float) -> DelaySample:
    """The delays of a batch delivered at ``now`` whose tasks wrote ``samples``: one sample of
    ``now − source time``, the tasks' points pooled by their counts. A source time in the future
    (clocks of two hosts) counts as no delay."""
    parts = [s for s in samples if s.count]
    count = sum(s.count for s in parts)
    if not count:
        return DelaySample(now, 0, ())
    delays = [DelaySample(now, s.count, tuple(max(0.0, now - t) for t in reversed(s.points))) for s in parts]
    if len(delays) == 1:
        return delays[0]
    return pooled(delays, now)


def _weighted(samples: Iterable[DelaySample]) -> list[tuple[float, float]]:
    """Every point of ``samples`` with the share of messages it stands for, sorted by value."""
    out: list[tuple[float, float]] = []
    for s in samples:
        if s.count and s.points:
            weight = s.count / len(s.points)
            out.extend((p, weight) for p in s.points)
    out.sort()
    return out


def _quantiles(points: list[tuple[float, float]], qs: list[float]) -> list[float]:
    """The ``qs`` quantiles (ascending) of weighted ``points`` (sorted by value), in one pass:
    for each, the first value whose cumulative weight reaches ``q`` of the total."""
    total = sum(w for _, w in points)
    out: list[float] = []
    i, seen = 0, 0.0
    for q in qs:
        target = q * total - 1e-9
        while i < len(points) - 1 and seen + points[i][1] < target:
            seen += points[i][1]
            i += 1
        out.append(points[i][0])
    return out


_RANKS = [k / (POINTS - 1) for k in range(POINTS)]


def quantile(samples: Iterable[DelaySample], q: float) -> float:
    """The ``q`` quantile (0..1) of the delays of all messages in ``samples``; NaN for none."""
    points = _weighted(samples)
    return _quantiles(points, [q])[0] if points else math.nan


def pooled(samples: Iterable[DelaySample], at: float) -> DelaySample:
    """One sample of every message of ``samples`` (a window of batches), stamped ``at``."""
    items = [s for s in samples if s.count]
    count = sum(s.count for s in items)
    if not count:
        return DelaySample(at, 0, ())
    return DelaySample(at, count, tuple(_quantiles(_weighted(items), _RANKS)))


def bucket_counts(samples: Iterable[DelaySample]) -> tuple[list[float], float, float]:
    """Prometheus histogram values of ``samples``: cumulative counts per :data:`BUCKETS` bound
    (then +Inf), the estimated sum of delays, and the count."""
    cumulative = [0.0] * (len(BUCKETS) + 1)
    total = 0.0
    count = 0.0
    for value, weight in _weighted(samples):
        total += value * weight
        count += weight
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                cumulative[i] += weight
        cumulative[-1] += weight
    return cumulative, total, count
