"""Benchmark: one decision tick over 10,000 Numaflow vertices and over 10,000 KPA revisions.

Every vertex has full windows (lookback 120 s of 1 s samples for rate and pending, in a
:class:`~tidal.scaling.Rater`, two replicas reporting counters); every KPA revision has a full
60 s stable window. One tick = what the controller does each second: record the new sample,
compute rate and pending over the lookback, build the observation, decide. Reports the median
milliseconds per tick over several ticks. Goal on a 2-core machine: under 100 ms each.

Run: ``tidal bench scaling``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from tidal.bench import RESULTS, write_result
from tidal.scaling import (
    KpaDecider,
    KpaSpec,
    NumaflowScale,
    PartitionMetrics,
    Rater,
    VertexKind,
    VertexObservation,
    decide,
)

N = 10_000
LOOKBACK = 120
TICKS = 7


def numaflow_tick_ms(n: int = N) -> list[float]:
    scale = NumaflowScale(target_processing_seconds=3)
    raters = [Rater() for _ in range(n)]
    for t in range(LOOKBACK + 1):
        for i in range(n):
            raters[i].record(t, {"r0": t * 100.0 + i, "r1": t * 50.0}, 1000.0 + (i % 50) * 100)
    names = [f"v{i}" for i in range(n)]  # a controller knows its vertices' names
    timings = []
    now = float(LOOKBACK)
    for _ in range(TICKS):
        now += 1
        started = time.perf_counter()
        for i in range(n):
            rater = raters[i]
            rater.record(now, {"r0": now * 100.0 + i, "r1": now * 50.0}, 1000.0 + (i % 50) * 100)
            rate, pending = rater.metrics(now, LOOKBACK)
            obs = VertexObservation(
                names[i],
                VertexKind.SOURCE,
                replicas=2,
                ready_replicas=2,
                last_scaled_at=0.0,
                partitions=(PartitionMetrics("p", rate, pending),),
            )
            decide(scale, obs, now)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def kpa_tick_ms(n: int = N) -> list[float]:
    spec = KpaSpec()
    deciders = [KpaDecider(f"r{i}", spec, 0.0, ready=1) for i in range(n)]
    for t in range(60):
        for i, d in enumerate(deciders):
            d.record(float(t), 50.0 + i % 100)
    timings = []
    now = 59.0
    for _ in range(TICKS):
        now += 2  # the decider ticks every 2 s
        started = time.perf_counter()
        for i, d in enumerate(deciders):
            d.record(now, 50.0 + i % 100)
            d.scale(now, ready=2, current=2)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def main(out: Path = RESULTS) -> int:
    results = {}
    for name, fn in (("numaflow", numaflow_tick_ms), ("kpa", kpa_tick_ms)):
        t = fn()
        results[name] = {
            "entities": N,
            "median_ms_per_tick": round(statistics.median(t), 1),
            "min_ms": round(min(t), 1),
            "max_ms": round(max(t), 1),
            "us_per_decision": round(statistics.median(t) * 1000 / N, 2),
        }
    print("| policy | entities | median ms / tick | min | max | µs / decision | goal |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['entities']} | {r['median_ms_per_tick']} | {r['min_ms']} | {r['max_ms']} "
            f"| {r['us_per_decision']} | < 100 ms |"
        )
    path = write_result("scaling_tick", results, out)
    print(f"wrote {path}")
    return 0
