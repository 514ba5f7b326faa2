"""The executor allocator's rules: how many executors the replicas need, which to kill, who is ready.

On a cluster manager a replica is a task slot: ``executors = clamp(ceil(Σ replicas / executor
cores), min, max)``. Growing is one absolute request for the new total (Spark's
``requestTotalExecutors``); shrinking is explicit, because on standalone (and Kubernetes) a
lower target alone removes nothing: the allocator kills **idle** executors first, the newest
of them first, and kills one that runs a task only after ``shrink_wait`` seconds in which no
idle executor turned up — the task's micro-batch then runs again, exactly once all the same, but
later. Every evaluation is an :class:`ExecutorDecision` with its inputs and one line of reason.

**Idle vertices hold no executors.** A vertex with no backlog that processed nothing for
``idle_seconds`` keeps its replicas (Numaflow's rules step them down over its cooldowns, or
keep them for the next wave) but needs no task slot: an idle query runs no tasks. Its replicas
are left out of the sum, so executors go as soon as the work is gone, as under Spark's dynamic
allocation (``executorIdleTimeout``), not a cooldown and a step of two at a time later. When it
has work again its replicas count at once, before the policy even looks. Numaflow has no such
rule: its pods are its replicas; here the executors are what costs.

Ready replicas on a cluster are the slots that exist: when the registered executors' cores are
fewer than the replicas asked for, :func:`ready_slots` shares them among the vertices in
proportion to their replicas (FAIR pools share a cluster roughly that way), so the policy sees
a replica that is still starting as not ready.

Pure: no Spark, no clock; ``now`` and what the cluster looks like are arguments.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from tidal.errors import require
from tidal.scaling.executor_payoff import Payoff

__all__ = [
    "Executor",
    "ExecutorBounds",
    "ExecutorDecision",
    "ExecutorRule",
    "decide_executors",
    "ready_slots",
    "slotted",
]


class ExecutorRule(StrEnum):
    GROW = "grow"  # more executors needed than requested: request the new total
    STARTING = "starting"  # requested executors have not registered yet
    SHRINK = "shrink"  # more registered than needed: kill the idle ones
    SHRINK_WAITING = "shrink-waiting"  # every candidate runs a task: wait for one to go idle
    BACKOFF = "backoff"  # executors failed to start: ask for no more until the back-off ends
    STEADY = "steady"


@dataclass(frozen=True)
class Executor:
    """One registered executor as Spark's status store shows it."""

    id: str
    host: str
    cores: int
    active_tasks: int = 0
    completed_tasks: int = 0
    added_at: float = 0.0  # seconds since the epoch


@dataclass(frozen=True)
class ExecutorBounds:
    """``cluster:`` in the pipeline: cores per executor, min and max executors."""

    cores: int = 1
    min: int = 0
    max: int = 8
    shrink_wait: float = 30.0  # seconds a shrink waits for an idle executor before killing a busy one
    idle_seconds: float = 10.0  # a vertex with no backlog that processed nothing this long needs no slot
    payoff: float = 0.0  # the share of one executor's delivery the next must add (0: no cap)

    def __post_init__(self) -> None:
        require(
            self.cores >= 1,
            "cluster.executorCores",
            f"{self.cores} is below 1",
            "give each executor ≥ 1 core",
        )
        require(self.min >= 0, "cluster.minExecutors", f"{self.min} is negative", "use 0 or more")
        require(
            self.max >= max(1, self.min),
            "cluster.maxExecutors",
            f"{self.max} is below 1 or below minExecutors {self.min}",
            "set maxExecutors ≥ max(1, minExecutors)",
        )
        require(
            self.shrink_wait >= 0,
            "cluster.shrinkWaitSeconds",
            f"{self.shrink_wait} is negative",
            "use 0 or more",
        )
        require(
            self.idle_seconds >= 0,
            "cluster.executorIdleSeconds",
            f"{self.idle_seconds} is negative",
            "use 0 or more",
        )
        require(
            self.payoff >= 0, "cluster.executorPayoff", f"{self.payoff} is negative", "use 0 (off) or more"
        )

    @classmethod
    def of(cls, cluster: Any) -> ExecutorBounds:
        """From a pipeline's ``cluster:`` block (:class:`tidal.spec.cluster.ClusterSpec`)."""
        return cls(
            cluster.executor_cores,
            cluster.min_executors,
            cluster.max_executors,
            cluster.shrink_wait_seconds,
            cluster.executor_idle_seconds,
            cluster.executor_payoff,
        )

    def needed(self, replicas: int) -> int:
        """``clamp(ceil(replicas / cores), min, max)``."""
        return max(self.min, min(self.max, math.ceil(max(0, replicas) / self.cores)))


@dataclass(frozen=True)
class ExecutorDecision:
    at: float
    rule: ExecutorRule
    replicas: int  # Σ replicas the vertices want
    registered: int  # executors registered now
    requested: int  # the total asked of the cluster manager before this decision
    target: int  # the total to ask for now
    kill: tuple[str, ...] = ()
    reason: str = ""
    inputs: Mapping[str, Any] = field(default_factory=dict)
    forced: tuple[str, ...] = ()  # of ``kill``, the busy ones, killed with the task they run

    @property
    def changed(self) -> bool:
        return self.target != self.requested or bool(self.kill)

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["rule"] = str(self.rule)
        record["kill"] = list(self.kill)
        record["forced"] = list(self.forced)
        record["inputs"] = dict(self.inputs)
        return record

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> ExecutorDecision:
        fields = dict(record)
        fields.pop("kind", None)
        fields["rule"] = ExecutorRule(fields["rule"])
        fields["kill"] = tuple(fields.get("kill", ()))
        fields["forced"] = tuple(fields.get("forced", ()))
        return cls(**fields)


def _executors(n: int) -> str:
    return f"{n} executor{'' if n == 1 else 's'}"


def decide_executors(
    now: float,
    replicas: int,
    executors: Sequence[Executor],
    requested: int,
    bounds: ExecutorBounds,
    shrink_since: float | None = None,
    backoff_until: float | None = None,
    backoff_why: str = "",
    idle: Mapping[str, int] | None = None,
    payoff: Payoff | None = None,
) -> ExecutorDecision:
    """The allocator's decision at ``now``.

    ``replicas`` is the sum of the vertices' replicas, ``idle`` the replicas of the vertices idle
    for ``bounds.idle_seconds`` (left out: they need no slot), ``executors`` the registered ones,
    ``requested`` the total last asked for, ``shrink_since`` when the allocator first wanted
    fewer executors than are registered (None if it did not at the previous evaluation).
    ``backoff_until``: executors failed to start (``backoff_why``), so until then no more than
    the registered ones are asked for — a standalone master relaunches a failing executor at once,
    for ever, while more are wanted (measured: 349 launches in 6 s with a bad JVM option).
    ``payoff``: where one more executor was measured not to pay
    (:class:`~tidal.scaling.executor_payoff.ExecutorPayoff`), no more than its cap are asked for.
    """
    resting = sum((idle or {}).values())
    working = replicas - resting
    needed = bounds.needed(working)
    cap = None if payoff is None or payoff.cap is None else max(bounds.min, payoff.cap)
    target = needed if cap is None else min(needed, cap)
    registered = len(executors)
    inputs = {
        "replicas": replicas,
        "idle": dict(idle or {}),
        "executor_cores": bounds.cores,
        "min": bounds.min,
        "max": bounds.max,
        "registered": registered,
        "requested": requested,
        "busy": sum(1 for e in executors if e.active_tasks > 0),
    }
    if payoff is not None and payoff.rates:
        inputs["delivered_per_executors"] = {str(k): rate for k, rate, _ in payoff.rates}
    head = f"Σ replicas {replicas}"
    if resting:
        names = ", ".join(f"{n} {r}" for n, r in sorted((idle or {}).items()))
        quiet = f"nothing pending or processed for {bounds.idle_seconds:g} s"
        head += f", {resting} of them idle ({names}: {quiet})"
    head += f" on {bounds.cores}-core executors → {_executors(needed)}"
    if needed == bounds.max and math.ceil(working / bounds.cores) > bounds.max:
        head += f" (maxExecutors {bounds.max})"
    elif needed == bounds.min and math.ceil(working / bounds.cores) < bounds.min:
        head += f" (minExecutors {bounds.min})"
    if target < needed and payoff is not None:
        head += f", capped at {target}: {payoff.reason}"

    def result(
        rule: ExecutorRule, reason: str, kill: tuple[str, ...] = (), forced: tuple[str, ...] = ()
    ) -> ExecutorDecision:
        return ExecutorDecision(
            now, rule, replicas, registered, requested, target, kill, reason, inputs, forced
        )

    if target > registered and backoff_until is not None and now < backoff_until:
        held = ExecutorDecision(
            now, ExecutorRule.BACKOFF, replicas, registered, requested, registered, (),
            f"{head}; {registered} registered: executors failed to start ({backoff_why}); asking for "
            f"no more for {backoff_until - now:.0f} s", {**inputs, "backoff_until": backoff_until},
        )  # fmt: skip
        return held
    if target > registered:
        if target != requested:
            return result(ExecutorRule.GROW, f"{head}; {registered} registered: requesting {target}")
        return result(
            ExecutorRule.STARTING, f"{head}; {registered} registered, waiting for the others to start"
        )
    if target < registered:
        excess = registered - target
        free = sorted((e for e in executors if e.active_tasks == 0), key=lambda e: (-e.added_at, e.id))
        kill = [e.id for e in free[:excess]]
        waited = 0.0 if shrink_since is None else now - shrink_since
        if len(kill) < excess and waited >= bounds.shrink_wait:
            busy = sorted(
                (e for e in executors if e.active_tasks > 0), key=lambda e: (e.active_tasks, -e.added_at)
            )
            forced = [e.id for e in busy[: excess - len(kill)]]
            reason = (
                f"{head}; no idle executor for {waited:.0f} s ≥ shrinkWaitSeconds {bounds.shrink_wait:g}: "
                f"killing busy executor{'s' if len(forced) > 1 else ''} {', '.join(forced)} "
                "(its batch runs again)"
            )
            if kill:
                reason += f" and idle {', '.join(kill)}"
            return result(ExecutorRule.SHRINK, reason, tuple(kill + forced), tuple(forced))
        if kill:
            ids = ", ".join(kill)
            return result(
                ExecutorRule.SHRINK,
                f"{head}; {registered} registered: killing idle executor{'s' if len(kill) > 1 else ''} {ids}",
                tuple(kill),
            )
        return result(
            ExecutorRule.SHRINK_WAITING,
            f"{head}; {registered} registered, all running tasks: waiting for one to go idle "
            f"({waited:.0f} of {bounds.shrink_wait:g} s)",
        )
    if target != requested:  # registered == target: bring the request in line (after kills)
        return result(ExecutorRule.STEADY, f"{head}; {registered} registered: target set to {target}")
    return result(ExecutorRule.STEADY, f"{head}; {registered} registered")


def ready_slots(replicas: Mapping[str, int], slots: int, idle: Collection[str] = ()) -> dict[str, int]:
    """Each vertex's replicas that have a task slot, when ``slots`` (the registered executors'
    cores) may be fewer than the replicas asked for: in proportion to the replicas, the
    remainders to the largest fractions (ties by name), never more than a vertex asked for.
    An ``idle`` vertex needs no slot: its replicas are all ready, and the slots go to the others.

    >>> ready_slots({"a": 2, "b": 6}, 4)
    {'a': 1, 'b': 3}
    >>> ready_slots({"a": 2, "b": 6}, 10)
    {'a': 2, 'b': 6}
    >>> ready_slots({"a": 2, "b": 6}, 2, idle={"b"})
    {'b': 6, 'a': 2}
    """
    if idle:
        working = {n: r for n, r in replicas.items() if n not in idle}
        return {**{n: max(0, r) for n, r in replicas.items() if n in idle}, **ready_slots(working, slots)}
    total = sum(max(0, r) for r in replicas.values())
    if total <= slots:
        return {name: max(0, r) for name, r in replicas.items()}
    free = max(0, slots)
    shares = {name: max(0, r) * free / total for name, r in replicas.items()}
    out = {name: math.floor(share) for name, share in shares.items()}
    left = free - sum(out.values())
    for name in sorted(shares, key=lambda n: (-(shares[n] - out[n]), n))[:left]:
        out[name] += 1
    return out


def slotted(replicas: int, slots: int | None) -> int:
    """The replicas of a vertex that run: no more than its task ``slots`` on a cluster manager
    (its share of the registered cores, :func:`ready_slots`; None: no cap), and never fewer than
    one while it has any (Spark's FAIR pools queue that one task rather than starve the vertex).
    Admission sizes a micro-batch by it (:mod:`tidal.spark.batch.admission`); the probe counts
    the ready replicas by it.

    >>> slotted(6, 2), slotted(6, None), slotted(1, 0), slotted(0, 4)
    (2, 6, 1, 0)
    """
    if slots is None or replicas <= 0:
        return replicas
    return min(replicas, max(1, slots))
