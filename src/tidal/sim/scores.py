"""Scores of one simulation: how well a policy met the load, and what it cost.

Per trace × policy (:class:`Scores`):

* ``behind`` — the fraction of seconds in which the backlog along some source-to-sink path
  exceeds the path's ``targetProcessingSeconds`` of demand: ``Σ pending on the path >
  target × max(the source's offered rate, the slowest vertex's one-replica capacity)``, with
  the largest target on the path. End to end, so a policy cannot hide a backlog by splitting it
  over vertices that are each "within target", or by copying the oracle late with no catch-up
  (tests/unit/sim/test_scores.py). The floor keeps a few messages during a lull from counting.
* ``p50_delay``, ``p99_delay`` — end-to-end delay of every message, arrival to sink, in
  seconds. Messages still in flight at the end count with their age so far, so a policy that
  never drains cannot look fast.
* ``replica_seconds`` and ``cost`` — the area under the allocated replicas (starting replicas
  cost too), summed over the vertices, and its ratio to the oracle's (the least replicas that
  keep up with each second's load, asked for one start-up ahead so they are ready in time,
  :func:`~tidal.sim.run.oracle`). A cost below 1 is not a saving: it means running behind
  (``behind`` says how much).
* ``actions`` — scaling changes, all vertices.
* ``first_scale_up`` — median seconds from a rise in the load (a step up of more than 20 %)
  to a vertex's first scale-up, over every vertex whose oracle count rose with it; ``None``
  when none scaled up after one.
* ``settle_decisions`` — after each step (up or down) followed by at least two minutes of
  steady load: the controller decisions until the bottleneck vertex's replicas stop changing
  until the next step (for at least a minute), at no more than 10 % below the oracle.
  Headroom above the oracle is not counted against it (a policy that targets 70 %
  utilization settles above the oracle on purpose; ``cost`` shows what that headroom costs).
  Median over the steps that settled; ``None`` when none did. These are ticks (holds count),
  so a policy that settles at once scores 1 and one that waits scores its wait.
* ``settle_changes`` — after each such step, the replica changes any one vertex made before
  the next step: the most over the vertices, then the most over the steps. DS2's measure (one
  step to a configuration that keeps up): 1 is a step settled in one decision per vertex, and
  a catch-up's extra replicas released later, or a scale-down in two halves, count twice; a
  pre-scale counts for the step it was asked for ahead of (its one decision).
  ``None`` when the trace has no step followed by two minutes of steady load.
* ``cold_start`` — median seconds from a message arriving at an empty pipeline with some
  vertex at zero replicas to the first message of that second reaching the sink.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from tidal.scaling import Decision, Rule
from tidal.sim.run import SimResult
from tidal.spec import PipelineSpec, numaflow_scale

__all__ = ["Scores", "score", "weighted_quantile"]

SETTLE_PLATEAU = 120.0  # seconds of steady load a step needs before "settled" means anything
RISE = 1.2  # a step up: the load after is more than 20 % above the load before
SETTLE_HOLD = 60.0  # and "stable" means holding for at least a minute before the next step
SHORT = 0.9  # "within 10 % of the needed replicas": at most 10 % below the oracle


@dataclass(frozen=True)
class Scores:
    trace: str
    policy: str
    behind: float
    p50_delay: float
    p99_delay: float
    replica_seconds: float
    oracle_replica_seconds: float
    cost: float
    actions: int
    first_scale_up: float | None
    settle_decisions: float | None
    settle_changes: int | None
    cold_start: float | None
    arrived: int
    delivered: int

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def weighted_quantile(values: dict[float, int], q: float) -> float:
    """The ``q`` quantile of ``values`` (value → count), nearest rank; 0.0 when empty."""
    total = sum(values.values())
    if total == 0:
        return 0.0
    rank = max(1, math.ceil(q * total - 1e-9))
    seen = 0
    for value in sorted(values):
        seen += values[value]
        if seen >= rank:
            return value
    return max(values)


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def paths(spec: PipelineSpec) -> list[list[str]]:
    """Every source-to-sink path of ``spec``, as vertex names in order."""
    outs = {v.name: spec.outputs(v.name) for v in spec.vertices}
    found: list[list[str]] = []

    def walk(path: list[str]) -> None:
        nexts = outs[path[-1]]
        if not nexts:
            found.append(path)
        for name in nexts:
            walk([*path, name])

    for v in spec.vertices:
        if v.source is not None:
            walk([v.name])
    return found


def behind_seconds(result: SimResult) -> int:
    """Seconds in which some source-to-sink path's backlog exceeds its target (see ``behind``)."""
    targets = {
        v.name: numaflow_scale(v.scale, v.name).target_processing_seconds for v in result.spec.vertices
    }
    batch = result.spec.limits.read_batch_size
    checks = [
        (path, max(targets[v] for v in path), min(result.models[v].sustained(batch) for v in path))
        for path in paths(result.spec)
    ]
    behind = 0
    for i in range(len(result.times)):
        for path, target, floor in checks:
            backlog = sum(result.pending[v][i] for v in path)
            if backlog > target * max(result.demand[path[0]][i], floor):
                behind += 1
                break
    return behind


def score(result: SimResult) -> Scores:
    times = result.times
    n = len(times)
    end = times[-1] if times else 0.0
    names = list(result.replicas)
    behind = behind_seconds(result)

    delays = dict(result.delays)
    for born, count in result.undelivered:
        age = round(end - born, 6)
        delays[age] = delays.get(age, 0) + count

    replica_seconds = float(sum(sum(result.replicas[name]) for name in names))
    oracle_seconds = float(sum(sum(result.oracle[name]) for name in names))

    rates = result.trace.rates
    rises, steps = [], []
    for at in result.trace.steps:
        i = int(at)
        if 0 < i < len(rates):
            if rates[i] > RISE * rates[i - 1]:
                rises.append(at)
            steps.append(at)
    bounds = [*sorted(result.trace.steps), float(len(rates))]

    def next_step(at: float) -> float:
        return next(b for b in bounds if b > at)

    def counts_for(d: Decision, at: float, until: float) -> bool:
        """Does a change count for ``settle_changes`` after the step at ``at``? A pre-scale counts
        for the step it was asked for ahead of (the next at or after it), where it is that
        step's one decision, not a second change for the step before."""
        if d.rule != Rule.PRE_SCALE:
            return at < d.at <= until
        return next((b for b in bounds if b >= d.at), None) == at

    reactions = []
    for at in rises:
        until, i = next_step(at), int(at)
        for name in names:  # every vertex the rise needs more of
            offered = result.demand[name]
            cap = result.models[name].sustained(result.spec.limits.read_batch_size)
            if math.ceil(offered[i] / cap - 1e-9) <= math.ceil(offered[i - 1] / cap - 1e-9):
                continue
            ups = [d.at for d in result.changes if d.vertex == name and d.desired > d.current]
            ups = [t for t in ups if at < t <= until]
            if ups:
                reactions.append(min(ups) - at)

    settles: list[float] = []
    most_changes: list[int] = []
    bottleneck = result.bottleneck
    got, want = result.replicas[bottleneck], result.oracle[bottleneck]
    for at in steps:
        until = next_step(at)
        if until - at < SETTLE_PLATEAU:
            continue
        ticks = [t for t in result.ticks if at < t <= until]
        within = [d.vertex for d in result.changes if counts_for(d, at, until)]
        per_vertex = [within.count(n) for n in names]
        most_changes.append(max(per_vertex, default=0))
        settled_at = None
        last = got[int(until) - 1] if until <= len(got) else got[-1]
        for t in reversed(ticks):  # the earliest tick from which nothing changes up to the next step
            i = int(t) - 1
            if got[i] != last or got[i] < SHORT * want[i]:
                break
            settled_at = t
        if settled_at is not None and until - settled_at >= SETTLE_HOLD:
            settles.append(float(sum(1 for t in ticks if t <= settled_at)))

    colds = [result.first_delivery.get(at, end) - at for at in result.empty_at_zero]

    return Scores(
        trace=result.trace.name,
        policy=result.policy,
        behind=behind / n if n else 0.0,
        p50_delay=weighted_quantile(delays, 0.50),
        p99_delay=weighted_quantile(delays, 0.99),
        replica_seconds=replica_seconds,
        oracle_replica_seconds=oracle_seconds,
        cost=replica_seconds / oracle_seconds if oracle_seconds else float("inf"),
        actions=len(result.changes),
        first_scale_up=_median(reactions),
        settle_decisions=_median(settles),
        settle_changes=max(most_changes) if most_changes else None,
        cold_start=_median(colds),
        arrived=result.trace.total,
        delivered=sum(result.delivered),
    )
