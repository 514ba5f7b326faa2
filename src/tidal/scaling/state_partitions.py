"""How many state partitions a reduce vertex should have: the policy of issue #60, part 2.

A reduce vertex's windows live in Spark's state store, split by key into partitions; each
micro-batch runs one task per partition after the shuffle (the state update, then the handler
and the writes: :class:`~tidal.spark.query.reduce.ReduceWriter`). Replicas scale the read side
only; the partitions bound the stateful stage's parallelism, and a move costs a pause (the query
stops, Spark rewrites the state, the query starts again: :mod:`tidal.spark.run.repartition`).
Numaflow cannot change them at all (a reduce vertex's replicas are its partitions, fixed in the
manifest), and Flink rescales keyed state only through a savepoint and a restart.

**What it measures**, per committed micro-batch since the last move (the runtime's
:class:`StateLoad`): the batch's wall seconds, and the stateful stage's seconds, estimated as
the tasks' summed busy seconds over the parallelism they had (``min(partitions, cores)``). Their
ratio, the *state share*, says how much of each batch the partitions are: near 1, more partitions
would shorten every batch; near 0, the batch is spent elsewhere (reading, the trigger interval)
and fewer would do as well.

**The rules** (medians over the batches, so one slow batch decides nothing):

- ``partitions-up``: the backlog would take longer than ``target_seconds`` to clear at the
  current rate (Numaflow's ``targetProcessingSeconds`` reading of a backlog), and the state share
  is at least :data:`UP_SHARE`. In one step, DS2-style: the stateful stage must get faster by the
  ratio of the rate needed to the rate processed, the rate needed sized as Numaflow sizes
  replicas (what waits is ``target_seconds`` of work), so ``partitions × backlog seconds /
  target_seconds`` (at most ×4, at least one more), within the bounds and the cores (more
  partitions than cores only queue their tasks);
- ``partitions-down``: no backlog beyond ``target_seconds`` of work, and at half the partitions
  the stateful stage would still take under :data:`DOWN_SHARE` of a batch: halved (not below
  ``min``). The gap between the two shares keeps a count from flapping;
- holds otherwise, saying which condition failed, and always for ``cooldown`` after a move: the
  larger of the floor and :data:`PAYBACK` times the pause the vertex's moves have cost (learnt,
  like executor start-ups): a move that stops the vertex for 3 s is not made more than once a
  minute; while fewer than :data:`MIN_BATCHES` batches ran since the move; and after a failed
  move, until its back-off is over.

Pure: time and the measurements are arguments; no Spark, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import median
from typing import Any

__all__ = [
    "DOWN_SHARE",
    "MIN_BATCHES",
    "PAYBACK",
    "UP_SHARE",
    "BatchTiming",
    "PartitionBounds",
    "PartitionDecision",
    "StateLoad",
    "decide_partitions",
]

UP_SHARE = 0.5  # the stateful stage is at least half of a batch: more partitions shorten batches
DOWN_SHARE = 0.25  # at half the partitions it would still be under a quarter of a batch
PAYBACK = 20.0  # no move within this many times the pause a move costs
MIN_BATCHES = 3  # batches measured since the last move before deciding again
MAX_STEP = 4.0  # at most ×4 in one move: the measure holds near the current count, not far from it


@dataclass(frozen=True, slots=True)
class PartitionBounds:
    """``statePartitions: {min, max}`` with the ceiling the cluster sets (its cores)."""

    min: int
    max: int
    cooldown: float = 60.0  # the floor of the wait after a move, seconds


@dataclass(frozen=True, slots=True)
class BatchTiming:
    """One committed micro-batch of the vertex: wall seconds, and its stateful tasks' busy sum."""

    batch_id: int
    wall: float
    busy: float


@dataclass(frozen=True, slots=True)
class StateLoad:
    """What the runtime measured of one reduce vertex (see the module's docstring)."""

    partitions: int
    cores: int  # task slots the run can have: the ceiling of a move
    batches: tuple[BatchTiming, ...]  # committed since the last move (or the start), oldest first
    pending: float | None  # messages waiting in its input, averaged over the lookback
    rate: float | None  # messages processed per second over the lookback
    target_seconds: float  # Numaflow's targetProcessingSeconds: the backlog to clear within it
    last_move_at: float | None = None
    pause: float | None = None  # seconds the vertex's last moves cost, learnt (None: none yet)
    retry_at: float = 0.0  # a failed move's back-off ends then


@dataclass(frozen=True, slots=True)
class PartitionDecision:
    """What the policy decided and why, with its inputs (``changed`` when a move is due)."""

    current: int
    desired: int
    rule: str
    reason: str
    inputs: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.desired != self.current


def state_share(load: StateLoad) -> float | None:
    """The median share of a batch the stateful stage took (None without measured batches)."""
    parallel = max(1, min(load.partitions, load.cores))
    shares = [min(1.0, b.busy / parallel / b.wall) for b in load.batches if b.wall > 0]
    return median(shares) if shares else None


def decide_partitions(load: StateLoad, bounds: PartitionBounds, now: float) -> PartitionDecision:
    """The partitions ``load``'s vertex should have (see the module's docstring for the rules)."""
    n = load.partitions
    ceiling = max(bounds.min, min(bounds.max, load.cores))
    share = state_share(load)
    backlog_s = (
        None if load.pending is None or not load.rate else load.pending / load.rate
    )  # seconds of work waiting at the current rate
    inputs: dict[str, Any] = {
        "partitions": n,
        "stateShare": None if share is None else round(share, 3),
        "batches": len(load.batches),
        "pending": load.pending,
        "rate": load.rate,
        "backlogSeconds": None if backlog_s is None else round(backlog_s, 1),
        "targetSeconds": load.target_seconds,
        "cores": load.cores,
        "pause": load.pause,
    }

    def hold(rule: str, why: str) -> PartitionDecision:
        return PartitionDecision(n, n, rule, why, inputs)

    if not bounds.min <= n <= ceiling:  # bounds changed, or a hand move outside them
        target = min(max(n, bounds.min), ceiling)
        return PartitionDecision(
            n, target, "partitions-bounds", f"{n} partitions is outside [{bounds.min}, {ceiling}]", inputs
        )
    if now < load.retry_at:
        return hold("partitions-backoff", f"a move failed: none before {load.retry_at - now:.0f} s more")
    cooldown = max(bounds.cooldown, PAYBACK * (load.pause or 0.0))
    inputs["cooldown"] = round(cooldown, 1)
    if load.last_move_at is not None and now - load.last_move_at < cooldown:
        return hold(
            "partitions-cooldown",
            f"moved {now - load.last_move_at:.0f} s ago; the cooldown is {cooldown:.0f} s (the "
            f"larger of {bounds.cooldown:g} s and {PAYBACK:g} × the {load.pause or 0:.1f} s a move pauses)",
        )
    if share is None or len(load.batches) < MIN_BATCHES:
        return hold("partitions-measuring", f"{len(load.batches)} batches measured; {MIN_BATCHES} needed")
    behind = backlog_s is not None and backlog_s > load.target_seconds
    if behind:
        if share < UP_SHARE:
            return hold(
                "partitions-hold",
                f"a backlog of {backlog_s:.0f} s, but the state stage is {share:.0%} of a batch "
                f"(under {UP_SHARE:.0%}): more partitions would not shorten the batches",
            )
        if n >= ceiling:
            return hold(
                "partitions-hold", f"a backlog of {backlog_s:.0f} s, and already at the most ({ceiling})"
            )
        assert load.rate is not None and load.pending is not None and backlog_s is not None
        needed = load.pending / load.target_seconds  # Numaflow's sizing: the backlog is target s of work
        ratio = min(MAX_STEP, needed / load.rate)
        desired = min(ceiling, max(n + 1, math.ceil(n * ratio)))
        return PartitionDecision(
            n,
            desired,
            "partitions-up",
            f"a backlog of {backlog_s:.0f} s (over the {load.target_seconds:g} s target) with the state "
            f"stage {share:.0%} of a batch: {needed:.0f}/s needed against {load.rate:.0f}/s, "
            f"{n} → {desired} partitions",
            inputs,
        )
    half = max(bounds.min, math.ceil(n / 2))
    if half < n:
        at_half = share * min(n, load.cores) / min(half, load.cores)
        inputs["shareAtHalf"] = round(at_half, 3)
        if at_half < DOWN_SHARE:
            return PartitionDecision(
                n,
                half,
                "partitions-down",
                f"no backlog past the target, and at {half} partitions the state stage would take "
                f"{at_half:.0%} of a batch (it takes {share:.0%} at {n}): over-partitioned, {n} → {half}",
                inputs,
            )
    return hold("partitions-hold", f"the state stage is {share:.0%} of a batch and the backlog within target")
