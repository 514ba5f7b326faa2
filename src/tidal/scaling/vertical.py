"""Vertical recommendations: how much memory and how many cores a replica of a vertex needs.

Kubernetes' VPA recommender, ported (``vertical-pod-autoscaler/pkg/recommender``, read at
kubernetes/autoscaler@55c37cd): usage samples go into **decaying histograms** with exponential
buckets (:class:`DecayingHistogram`: each bucket 5 % wider than the last, a sample's weight
doubling every half-life so that older ones count for less), memory as the **peak of each
aggregation interval**, and the recommendation is a percentile with a safety margin:

- target: the 90th percentile × 1.15;
- lower bound: the 50th percentile × 1.15 × ``(1 + 0.001 / confidence)^-2``;
- upper bound: the 95th percentile × 1.15 × ``(1 + 1 / confidence)``;

where ``confidence`` is the history's length in confidence intervals, or its sample count per
minute of one, whichever is smaller: a young history gives a wide range (a 1-minute history in
1-hour intervals: an upper bound 61× the percentile), a long one a tight range.

A replica in Tidal is a Spark task run by a Python worker (:mod:`tidal.spark.query.writer` measures
each task's peak resident memory and CPU time). Differences from upstream, on purpose, because a
pipeline's run lasts minutes to days rather than a pod's weeks: memory peaks are taken over
60 s intervals (upstream 24 h) and the confidence interval is 1 hour (upstream 24 h); the
half-lives are upstream's 24 h. The floors (250 MB, 0.025 cores) are upstream's per-pod minimums.
Pure: time is an argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = [
    "Buckets",
    "DecayingHistogram",
    "Recommendation",
    "Resource",
    "VerticalRecommender",
    "exponential_buckets",
    "linear_buckets",
]

SAFETY_MARGIN = 0.15
TARGET, LOWER, UPPER = 0.9, 0.5, 0.95
HALF_LIFE = 24 * 3600.0  # upstream's memory and CPU histogram half-life
MAX_DECAY_EXPONENT = 100  # upstream: the reference time moves once samples are 2^100 heavier
EPSILON = 0.001 * 0.1  # upstream: 0.001 × the minimal sample weight
MEMORY_INTERVAL = 60.0  # Tidal: a memory peak per minute (upstream: per 24 h)
CONFIDENCE_INTERVAL = 3600.0  # Tidal: 1 h (upstream: 24 h)
MIN_MEMORY = 250 * 1024 * 1024  # bytes (upstream PodMinMemoryMb 250)
MIN_CPU = 0.025  # cores (upstream PodMinCPUMillicores 25)


@dataclass(frozen=True, slots=True)
class Buckets:
    """Upstream's ``HistogramOptions``: exponential (``ratio`` > 1, bucket ``i`` starts at
    ``first × (ratio^i − 1)/(ratio − 1)``) or linear (``ratio`` 1, bucket ``i`` at ``i × first``)."""

    count: int
    first: float
    ratio: float
    epsilon: float = EPSILON

    def find(self, value: float) -> int:
        if self.ratio == 1.0:
            return min(max(0, int(value / self.first)), self.count - 1)
        if value < self.first:
            return 0
        bucket = int(math.log(value * (self.ratio - 1) / self.first + 1, self.ratio))
        return min(bucket, self.count - 1)

    def start(self, bucket: int) -> float:
        if self.ratio == 1.0:
            return bucket * self.first
        if bucket == 0:
            return 0.0
        return self.first * (self.ratio**bucket - 1) / (self.ratio - 1)


def exponential_buckets(
    max_value: float, first: float, ratio: float = 1.05, epsilon: float = EPSILON
) -> Buckets:
    """Upstream's ``NewExponentialHistogramOptions``."""
    if max_value <= 0 or first <= 0 or ratio <= 1 or epsilon <= 0:
        raise ValueError("max_value, first and epsilon must be > 0, ratio > 1")
    return Buckets(math.ceil(math.log(max_value * (ratio - 1) / first + 1, ratio)) + 1, first, ratio, epsilon)


def linear_buckets(max_value: float, size: float, epsilon: float = EPSILON) -> Buckets:
    """Upstream's ``NewLinearHistogramOptions`` (its tests use them)."""
    if max_value <= 0 or size <= 0 or epsilon <= 0:
        raise ValueError("max_value, size and epsilon must be > 0")
    return Buckets(math.ceil(max_value / size) + 1, size, 1.0, epsilon)


MEMORY_BUCKETS = exponential_buckets(1e12, 1e7)  # 10 MB to 1 TB
CPU_BUCKETS = exponential_buckets(1000.0, 0.01)  # 0.01 to 1000 cores


@dataclass
class DecayingHistogram:
    """Upstream's ``decayingHistogram``: weights grow as ``2^((t − reference) / halfLife)`` so a
    newer sample outweighs an older one, and percentiles read the bucket boundaries."""

    buckets: Buckets
    half_life: float = HALF_LIFE
    reference: float = 0.0
    weights: list[float] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        if not self.weights:
            self.weights = [0.0] * self.buckets.count

    def _factor(self, at: float) -> float:
        if at > self.reference + self.half_life * MAX_DECAY_EXPONENT:
            new = round(at / self.half_life) * self.half_life
            scale = 2.0 ** round((self.reference - new) / self.half_life)
            self.weights = [w * scale for w in self.weights]
            self.total *= scale
            self.reference = new
        return float(2.0 ** ((at - self.reference) / self.half_life))

    def add(self, value: float, weight: float, at: float) -> None:
        if weight < 0:
            raise ValueError("a sample's weight must be >= 0")
        w = weight * self._factor(at)
        self.weights[self.buckets.find(value)] += w
        self.total += w

    def empty(self) -> bool:
        return self.total < self.buckets.epsilon

    def percentile(self, p: float) -> float:
        """Upstream's ``Percentile``: the start of the bucket after the one where the cumulative
        weight reaches ``p`` of the total (0 when empty)."""
        if self.empty():
            return 0.0
        threshold, running = p * self.total, 0.0
        used = [i for i, w in enumerate(self.weights) if w >= self.buckets.epsilon]
        bucket, last = used[0], used[-1]
        while bucket < last:
            running += self.weights[bucket]
            if running >= threshold:
                break
            bucket += 1
        return (
            self.buckets.start(bucket + 1) if bucket < self.buckets.count - 1 else self.buckets.start(bucket)
        )


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource's recommendation: ``target`` with its ``lower`` and ``upper`` bounds."""

    target: float
    lower: float
    upper: float


@dataclass(frozen=True, slots=True)
class Recommendation:
    """Per replica of a vertex: memory in bytes, CPU in cores, and how much history backs them."""

    memory: Resource
    cpu: Resource
    samples: int
    history_seconds: float

    def to_dict(self) -> dict[str, object]:
        return {
            "memory_bytes": {
                "target": self.memory.target,
                "lower": self.memory.lower,
                "upper": self.memory.upper,
            },
            "cpu_cores": {"target": self.cpu.target, "lower": self.cpu.lower, "upper": self.cpu.upper},
            "samples": self.samples,
            "history_seconds": round(self.history_seconds, 1),
        }


@dataclass
class VerticalRecommender:
    """One vertex's history: feed each committed micro-batch's task peaks (:meth:`observe`),
    read :meth:`recommend`."""

    memory: DecayingHistogram = field(default_factory=lambda: DecayingHistogram(MEMORY_BUCKETS))
    cpu: DecayingHistogram = field(default_factory=lambda: DecayingHistogram(CPU_BUCKETS))
    first_at: float | None = None
    last_at: float | None = None
    samples: int = 0
    _peak: float = 0.0  # the current memory interval's peak
    _interval: float | None = None  # its start

    def observe(self, at: float, peak_memory: float | None, cores: float | None) -> None:
        """A task's peak resident memory (bytes) and the cores it used (CPU seconds over wall
        seconds); either may be unknown."""
        if peak_memory is None and cores is None:
            return
        self.first_at = at if self.first_at is None else self.first_at
        self.last_at = at
        self.samples += 1
        if cores is not None:
            self.cpu.add(max(0.0, cores), 1.0, at)
        if peak_memory is not None:
            start = math.floor(at / MEMORY_INTERVAL) * MEMORY_INTERVAL
            if self._interval is not None and start != self._interval and self._peak > 0:
                self.memory.add(self._peak, 1.0, self._interval)  # the finished interval's peak
                self._peak = 0.0
            self._interval = start
            self._peak = max(self._peak, peak_memory)

    def _confidence(self) -> float:
        if self.first_at is None or self.last_at is None:
            return 0.0
        lifespan = (self.last_at - self.first_at) / CONFIDENCE_INTERVAL
        per_minute = self.samples / (CONFIDENCE_INTERVAL / 60.0)
        return min(lifespan, per_minute)

    def recommend(self) -> Recommendation | None:
        """None until there is a sample."""
        if self.first_at is None or self.last_at is None:
            return None
        memory = DecayingHistogram(MEMORY_BUCKETS, self.memory.half_life, self.memory.reference,
                                   list(self.memory.weights), self.memory.total)  # fmt: skip
        if self._peak > 0 and self._interval is not None:  # the current interval counts too
            memory.add(self._peak, 1.0, self._interval)
        confidence = max(self._confidence(), 1e-9)
        return Recommendation(
            _estimate(memory, confidence, MIN_MEMORY),
            _estimate(self.cpu, confidence, MIN_CPU),
            self.samples,
            self.last_at - self.first_at,
        )


def _estimate(histogram: DecayingHistogram, confidence: float, floor: float) -> Resource:
    margin = 1 + SAFETY_MARGIN
    target = histogram.percentile(TARGET) * margin
    lower = histogram.percentile(LOWER) * margin * (1 + 0.001 / confidence) ** -2.0
    upper = histogram.percentile(UPPER) * margin * (1 + 1.0 / confidence)
    return Resource(max(floor, target), max(floor, lower), max(floor, upper))
