"""When a stateless step's shuffle partitions should follow its replicas (issue #60, part 3).

A SQL or DataFrame step (:mod:`tidal.spark.query.frames`) is scaled by splitting each
micro-batch into more read partitions: free, no restart. A step whose plan shuffles (a join
with a reference table too big to broadcast, a ``repartition``) has a second side, after the
shuffle, split into ``spark.sql.shuffle.partitions``; Spark reads that only when the query
starts (SPARK-53942: a stateless query takes a new count at its restart; before Spark 4.1 the
checkpoint's first count held for ever). Left alone, a step scaled to 8 replicas still runs
its post-shuffle side in the 2 tasks it started with. Spark's adaptive execution may coalesce
a small batch's shuffle into fewer tasks than the count, never more: the count is a ceiling.

So the step's count follows its replica count, by a restart between two batches, when it pays:

- never for a plan without a shuffle, or before the first batch says whether it has one;
- never for a step at zero replicas (a restart of an idle step buys nothing);
- only once the replicas (clamped to ``1..cores``) are :data:`FACTOR` × away from the count,
  in either direction: 2 → 3 restarts, 4 → 5 does not (a restart's pause for 25 % more tasks
  after the shuffle, which adaptive execution may coalesce anyway);
- at most once per cooldown: :data:`COOLDOWN_FLOOR` seconds, or :data:`PAUSE_MULTIPLE` × the
  restarts' learnt pause when that is longer (the state-partition policy's rule).

Pure: the caller measures (:mod:`tidal.spark.run.shuffle_follower`) and acts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "COOLDOWN_FLOOR",
    "FACTOR",
    "PAUSE_MULTIPLE",
    "ShuffleDecision",
    "ShuffleLoad",
    "decide_shuffle",
    "replicas_count",
]

FACTOR = 1.5  # replicas this far from the count (either way) are worth a restart
COOLDOWN_FLOOR = 60.0  # seconds between two restarts of one step, at least
PAUSE_MULTIPLE = 20.0  # ... or this many times the learnt pause of a restart


@dataclass(frozen=True, slots=True)
class ShuffleLoad:
    """What the rule decides on, for one step."""

    partitions: int  # the running query's shuffle partitions
    replicas: int  # the step's replicas now (the controller's)
    cores: int  # the cores the run can have: more tasks than this never run at once
    shuffles: bool | None  # the running query's plan shuffles (None: no batch planned yet)
    last_change_at: float | None = None  # when a restart last changed the count
    pause: float | None = None  # the learnt pause of a restart (seconds), if any was measured


@dataclass(frozen=True, slots=True)
class ShuffleDecision:
    desired: int
    changed: bool
    rule: str  # no-shuffle | unplanned | idle | matched | within-band | cooling | follow
    reason: str
    inputs: dict[str, Any] = field(default_factory=dict)


def replicas_count(replicas: int, cores: int) -> int:
    """The shuffle partitions ``replicas`` call for: as many, at least 1, at most the cores."""
    return max(1, min(replicas, max(1, cores)))


def cooldown(pause: float | None) -> float:
    return max(COOLDOWN_FLOOR, PAUSE_MULTIPLE * pause) if pause is not None else COOLDOWN_FLOOR


def decide_shuffle(load: ShuffleLoad, now: float) -> ShuffleDecision:
    """The step's shuffle partitions for ``load`` at ``now``: changed only by the rule ``follow``."""
    current = load.partitions
    target = replicas_count(load.replicas, load.cores)
    inputs: dict[str, Any] = {
        "shufflePartitions": current,
        "replicas": load.replicas,
        "cores": load.cores,
        "target": target,
        "shuffles": load.shuffles,
    }

    def hold(rule: str, reason: str) -> ShuffleDecision:
        return ShuffleDecision(current, False, rule, reason, inputs)

    if load.shuffles is None:
        return hold("unplanned", "no batch planned yet: whether the step shuffles is not known")
    if not load.shuffles:
        return hold("no-shuffle", "the step's plan has no shuffle: its replicas split all of its work")
    if load.replicas <= 0:
        return hold("idle", "the step is at zero replicas: a restart would buy nothing")
    if target == current:
        return hold("matched", f"{current} shuffle partitions for {load.replicas} replicas")
    ratio = max(target, current) / min(target, current)
    if ratio < FACTOR:
        return hold(
            "within-band",
            f"{target} tasks after the shuffle would be within {FACTOR:g}× of the {current} it runs: "
            "not worth a restart",
        )
    wait = cooldown(load.pause)
    inputs["cooldownSeconds"] = round(wait, 1)
    if load.last_change_at is not None and now - load.last_change_at < wait:
        left = wait - (now - load.last_change_at)
        return hold("cooling", f"{target} would follow the replicas; {left:.0f} s of cooldown left")
    return ShuffleDecision(
        target,
        True,
        "follow",
        f"{current} → {target} shuffle partitions to follow {load.replicas} replicas "
        f"(the side after the shuffle ran in {current} tasks)",
        inputs,
    )
