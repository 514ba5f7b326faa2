"""What the controller keeps per vertex between ticks, and the two things it works out from it
besides a decision: whether the vertex is stuck, and its lookback (Numaflow's dynamic lookback).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from tidal.controller.policy import VertexPolicy
from tidal.controller.ports import ProbeSample
from tidal.scaling import Decision, Rater, Rule, VertexKind, adaptive_lookback

__all__ = [
    "ADAPT_LOOKBACK_EVERY",
    "VertexState",
    "adapt_lookback",
    "due_at",
    "hold_down_after_outage",
    "outage_note",
    "scaled",
    "watch_progress",
]

log = logging.getLogger("tidal.controller")

ADAPT_LOOKBACK_EVERY = 30.0  # Numaflow's daemon re-computes the dynamic lookback every 30 s


@dataclass
class VertexState:
    name: str
    kind: VertexKind
    lookback_seconds: float  # the lookback in use: the configured one, stretched by adaptive_lookback
    policy: VertexPolicy
    rater: Rater
    # Never scaled: no cooldown holds a first scale-up (Numaflow's lastScaledAt starts empty), so
    # a pipeline that starts under load scales up at once; a first scale-down waits one down
    # cooldown from the start (``started_at``), so a vertex is not scaled down before its load had
    # time to show. On Spark the loop also starts only once every query is past its start
    # (``ready`` in :meth:`Controller.run`).
    last_scaled_at: float = -math.inf
    last: Decision | None = None
    rate: float | None = None
    pending: float | None = None
    configured_lookback: float = 0.0
    lookback_adapted_at: float | None = None
    started_at: float | None = None  # the first tick that saw it
    processed: float | None = None  # the last sample's cumulative count
    progress_at: float | None = None  # when it last processed something, or had nothing to do
    stuck_since: float | None = None  # set while pending and no progress for stuck_after seconds
    active_at: float | None = None  # when it last processed something, had messages pending or was raised
    outage_since: float | None = None  # its numbers could not be read from then (a metric outage)
    numbers_back_at: float | None = None  # when they came back after the last outage
    hole: str = "the metric outage"  # what left the hole numbers_back_at ends (or a driver restart)


def scaled(v: VertexState, current: int, desired: int, now: float, until: float | None = None) -> None:
    """A change of ``v``'s replicas applied at ``now``: the cooldowns count from it, and a raise
    counts as work for the executor allocator (``active_at``). A raise is an ask for capacity
    before its messages: a pre-scale ahead of a forecast rise, a wake on the path, a scale
    written from outside. Counted idle, its replicas held no executor until the messages came
    (:meth:`tidal.controller.loop.Controller.idle_for`): on the cluster's waves with executors
    at zero between them, `policy: tidal` pre-scaled `enrich` 0 → 3 and `orders` 0 → 1 seven
    seconds before the wave was due, and the allocator asked for no executor until `orders` had
    pending, five seconds later (2026-12-06). Raised, they are not idle for
    ``executorIdleSeconds``, so the executors start with the replicas; a pre-scale whose rise
    does not come lets them go as any idle vertex does.

    ``until``: a pre-scale's rise is due then (``rise_due_at``), and the raise counts as work
    until it, not only from now: asked for a start-up ahead and counted from the ask, the
    executor started for `enrich` was let go 10 s later, 2 s after the rise was due and 3 s
    before its messages came (the waves, 2026-12-07), and the wave waited for executors again."""
    v.last_scaled_at = now
    if desired > current:
        v.active_at = now if until is None else max(now, until)


def due_at(decision: Decision) -> float | None:
    """When the rise a pre-scale asked ahead for is due (its ``rise_due_at`` input), else None."""
    due = decision.inputs.get("rise_due_at") if decision.rule == Rule.PRE_SCALE else None
    return float(due) if isinstance(due, int | float) else None


def watch_progress(
    v: VertexState, sample: ProbeSample, now: float, stuck_after: float
) -> tuple[Rule, str] | None:
    """The "stuck" condition: messages pending and none processed for ``stuckAfterSeconds``
    (a UDF that hangs, a sink that blocks). It is reported — logged, recorded as an event,
    shown in the status — not acted on: scaling cannot unstick a hung call. Returns the
    note to record when the vertex becomes stuck or moves again. Also keeps ``active_at``, the
    last time the vertex processed something or had messages pending: the executor allocator
    lets an idle vertex's executors go (:meth:`tidal.controller.loop.Controller.idle_for`)."""
    moved = v.processed is not None and sample.processed > v.processed
    idle = sample.pending is not None and sample.pending <= 0
    if moved or not idle or v.active_at is None:  # a pending not known counts as work
        v.active_at = now
    v.processed = sample.processed
    if v.progress_at is None or moved or idle:
        v.progress_at = now
        if v.stuck_since is not None:
            v.stuck_since = None
            return Rule.UNSTUCK, "processing again"
        return None
    quiet = now - v.progress_at
    if v.stuck_since is None and quiet >= stuck_after and (sample.pending or 0) > 0:
        v.stuck_since = now
        return (
            Rule.STUCK,
            f"{sample.pending:,.0f} messages pending (now) and none processed for {quiet:.0f} s "
            f"(stuckAfterSeconds {stuck_after:g}): a call may hang; see the run's log",
        )
    return None


def adapt_lookback(v: VertexState, now: float) -> None:
    """Numaflow's dynamic lookback, every 30 s: stretch the window over the vertex's longest
    quiet spell (a slow, bursty UDF is not judged idle between two outputs), back toward the
    configured value when the spells shorten."""
    if v.lookback_adapted_at is not None and now - v.lookback_adapted_at < ADAPT_LOOKBACK_EVERY:
        return
    v.lookback_adapted_at = now
    pending = v.rater.latest_pending()
    idle = pending is None or pending <= 0  # nothing known to wait: a quiet spell is not slowness
    granularity = min(60.0, v.configured_lookback)
    adapted = adaptive_lookback(
        v.rater, now, v.lookback_seconds, v.configured_lookback, idle=idle, granularity=granularity
    )
    if adapted != v.lookback_seconds:
        log.info("vertex %s: lookback %g s → %g s (longest quiet spell)", v.name, v.lookback_seconds, adapted)
        v.lookback_seconds = adapted


def outage_note(v: VertexState, now: float, exc: Exception) -> Decision:
    """The hold of a vertex whose numbers could not be read this tick (its buffer or its
    receivers unreachable: a metric outage). No decision is made on missing data, so nothing
    scales down or to zero for it; the hold is the vertex's last decision (the live view shows
    it) and an event (written once while the outage lasts)."""
    replicas = v.last.desired if v.last is not None else 0
    return Decision(
        v.name,
        now,
        replicas,
        replicas,
        Rule.METRICS_UNAVAILABLE,
        f"its numbers could not be read ({type(exc).__name__}: {exc}); holding at {replicas} "
        "until they come back",
        {"error": f"{type(exc).__name__}: {exc}"},
    )


def hold_down_after_outage(v: VertexState, decision: Decision, now: float) -> Decision:
    """A scale-down (or to zero) within one lookback of a metric outage's end is held: the window
    its averages come from still has the outage's hole, so they are the numbers from before it.
    A driver restart leaves the same hole (:meth:`Controller.restore`: nothing was sampled while
    no driver ran, and its queries process nothing until Spark has warmed up): Knative's
    autoscaler, restarted, likewise does not scale down before it holds a stable window again.
    Found on the chaos bench: a map held at 2 through a 30 s outage went to 1 the first tick its
    numbers came back (an averaged pending of 369 from before the outage, against 1,300 waiting),
    and back to 2 five seconds later. A scale-up is not held: missing data never asks for less."""
    back = v.numbers_back_at
    if back is None or decision.desired >= decision.current or now - back >= v.lookback_seconds:
        return decision
    return Decision(
        v.name,
        now,
        decision.current,
        decision.current,
        Rule.METRICS_SETTLING,
        f"{decision.reason}; held: the lookback ({v.lookback_seconds:g} s) still spans "
        f"{v.hole} that ended {now - back:.0f} s ago",
        {**decision.inputs, "numbersBackAt": back},
        recommended=decision.recommended,
    )
