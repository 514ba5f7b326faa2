"""Numaflow's vertex autoscaler as a pure function: ``decide(scale, observation, now) → Decision``.

This reproduces ``pkg/reconciler/vertex/scaling/scaling.go`` (``spec/numaflow.md`` §1–2), with
the checks in upstream order:

 1. ``disabled`` → leave alone;  2. vertex not running → skip;
 3. global cooldown: ``now − lastScaledAt < min(up, down)`` → skip;
 4. replicas still converging → skip;
 5. sources: an active cron window replaces ``[min, max]``; below/above it → step toward it;
 6. ``min == max`` → fixed;
 7. UDF/sink without buffer info → skip;
 8. zero replicas: a UDF/sink wakes to 1 when its buffer has pending; a source peeks (→ 1) after
    ``zeroReplicaSleepSeconds``;
 9. no ready replica → skip;
10. any partition's rate or pending not available (missing or negative) → leave alone;
11. desired = 0 only when total pending and total rate are both 0, else the time or buffer model;
12. rate-limit guard: at ``rateLimit.max`` (× readBatchSize for sources) do not scale up;
13. clamp to ``[min, max]``; 14. outside the bounds → jump at once;
15. down: ``min(current − desired, replicasPerScaleDown)`` after the down cooldown;
16. up: direct back pressure → −1 (no down cooldown), downstream back pressure → hold, else
    ``min(desired − current, replicasPerScaleUp)`` after the up cooldown.

Formulas (per partition, the maximum wins, starting from 1): the **time model**
``round((pending / rate) / targetProcessingSeconds × ready)`` for sources, and for UDFs/sinks while
``pending ≤ bufferLength − targetAvailableBufferLength``; otherwise the **buffer model**
``round(targetAvailable / ((limit − pending) / ready))``, or ``replicas + replicasPerScaleUp`` once
pending reaches the limit. Rounding is half away from zero; the result is floored at 1 and capped at
pending.

Deliberate differences from upstream (each also in ``docs/scaling.md``):

* **Stalled partitions hold.** Upstream skips a partition with pending > 0 and rate 0, so a stuck
  vertex is scaled *down* to 1. Tidal votes to keep the ready replicas, as Numaflow's MonoVertex
  scaler does: a stall is not evidence that fewer replicas would do.
* **min is respected at zero.** Upstream's zero-replica branch ignores ``min`` (issue #2220); Tidal
  brings a vertex at 0 up to ``min`` when ``min > 0``.
* **min == max is enforced.** Upstream skips such a vertex and relies on its controller's clamp;
  here the policy is the only actor, so a vertex away from a fixed count is moved to it.
* **No int32 wrap.** Python integers do not overflow; a huge raw value stays huge and is clamped.
* The lifecycle check has its ``return`` (upstream logs and carries on).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from tidal import errors
from tidal.scaling.backpressure import Pressure, PressureCheck
from tidal.scaling.cron import CronSpec
from tidal.scaling.decision import Decision, Rule
from tidal.scaling.rates import MAX_LOOKBACK_SECONDS
from tidal.scaling.windows import round_half_away

__all__ = [
    "DEFAULT_READ_BATCH_SIZE",
    "BufferInfo",
    "NumaflowScale",
    "PartitionMetrics",
    "VertexKind",
    "VertexObservation",
    "decide",
    "desired_replicas",
]

DEFAULT_READ_BATCH_SIZE = 500


class VertexKind(StrEnum):
    SOURCE = "source"
    UDF = "udf"
    SINK = "sink"


def _check(condition: bool, path: str, problem: str, fix: str) -> None:
    if not condition:
        raise errors.SpecError(path, problem, fix)


@dataclass(frozen=True, slots=True)
class NumaflowScale:
    """A vertex's ``scale:`` block with Numaflow's names (in snake case) and defaults (§2).

    Invalid values raise :class:`tidal.errors.SpecError` naming the field, e.g.
    ``scale.max: 1 is below min 3 (raise max or lower min)``.
    """

    disabled: bool = False
    min: int = 0
    max: int = 50
    lookback_seconds: float = 120.0
    scale_up_cooldown_seconds: float = 90.0
    scale_down_cooldown_seconds: float = 90.0
    zero_replica_sleep_seconds: float = 120.0
    target_processing_seconds: float = 20.0
    target_buffer_availability: float = 50.0
    replicas_per_scale_up: int = 2
    replicas_per_scale_down: int = 2
    cron: CronSpec | None = None

    def __post_init__(self) -> None:
        _check(self.min >= 0, "scale.min", f"{self.min} is negative", "use 0 or more")
        _check(
            self.max >= self.min,
            "scale.max",
            f"{self.max} is below min {self.min}",
            "raise max or lower min",
        )
        _check(
            0 < self.lookback_seconds <= MAX_LOOKBACK_SECONDS,
            "scale.lookbackSeconds",
            f"{self.lookback_seconds} is outside (0, {MAX_LOOKBACK_SECONDS:.0f}]",
            "use a value from 1 to 600 seconds",
        )
        for name, value in (
            ("scaleUpCooldownSeconds", self.scale_up_cooldown_seconds),
            ("scaleDownCooldownSeconds", self.scale_down_cooldown_seconds),
            ("zeroReplicaSleepSeconds", self.zero_replica_sleep_seconds),
        ):
            _check(value >= 0, f"scale.{name}", f"{value} is negative", "use 0 or more seconds")
        _check(
            self.target_processing_seconds > 0,
            "scale.targetProcessingSeconds",
            f"{self.target_processing_seconds} must be > 0",
            "use the seconds within which pending messages should be processed, e.g. 20",
        )
        _check(
            0 < self.target_buffer_availability <= 100,
            "scale.targetBufferAvailability",
            f"{self.target_buffer_availability} is outside (0, 100]",
            "use a percentage of bufferMaxLength, e.g. 50",
        )
        for name, step in (
            ("replicasPerScaleUp", self.replicas_per_scale_up),
            ("replicasPerScaleDown", self.replicas_per_scale_down),
        ):
            _check(step >= 1, f"scale.{name}", f"{step} is below 1", "use 1 or more replicas per step")
        if self.cron is not None:
            for i, window in enumerate(self.cron.schedules):
                path = f"scale.cron.schedules[{i}]"
                _check(window.min >= 0, f"{path}.min", f"{window.min} is negative", "use 0 or more")
                _check(
                    window.max >= window.min,
                    f"{path}.max",
                    f"{window.max} is below min {window.min}",
                    "raise max or lower min",
                )
                _check(
                    self.min <= window.min and window.max <= self.max,
                    path,
                    f"[{window.min}, {window.max}] is outside the base bounds [{self.min}, {self.max}]",
                    "widen scale.min/scale.max: the base bounds always win (Numaflow #3632)",
                )

    @property
    def fixed(self) -> bool:
        return self.min == self.max


@dataclass(frozen=True, slots=True)
class PartitionMetrics:
    """Rate (messages/s over the lookback, all replicas) and averaged pending of one partition.

    ``None`` or a negative value means "not available".
    """

    name: str
    rate: float | None
    pending: float | None

    @property
    def available(self) -> bool:
        return self.rate is not None and self.pending is not None and self.rate >= 0 and self.pending >= 0


@dataclass(frozen=True, slots=True)
class BufferInfo:
    """An owned input buffer (UDF/sink): limits and the *current* pending count (for the wake)."""

    name: str
    max_length: int
    usage_limit: float
    pending: int = 0

    @property
    def length_limit(self) -> int:
        return int(self.max_length * self.usage_limit)


@dataclass(frozen=True, slots=True)
class VertexObservation:
    """What the controller saw of one vertex at one tick."""

    vertex: str
    kind: VertexKind
    replicas: int
    ready_replicas: int
    last_scaled_at: float
    partitions: Sequence[PartitionMetrics] = ()
    buffers: Sequence[BufferInfo] = ()
    desired_replicas: int | None = None  # what the actuator was last asked for; None = replicas
    running: bool = True
    rate_limit_max: float | None = None  # spec.limits.rateLimit.max
    read_batch_size: int = DEFAULT_READ_BATCH_SIZE
    extra: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Estimate:
    desired: int
    reason: str
    inputs: dict[str, object]


def _fmt(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.3g}"


def desired_replicas(scale: NumaflowScale, obs: VertexObservation) -> _Estimate:
    """Numaflow ``desiredReplicas()`` (post-#2996): the max over partitions, starting from 1."""
    ready = obs.ready_replicas
    t = scale.target_processing_seconds
    buffer_length = limit = target_available = 0
    if obs.kind != VertexKind.SOURCE and obs.buffers:
        last = obs.buffers[-1]
        buffer_length = last.max_length
        limit = last.length_limit
        target_available = int(buffer_length * scale.target_buffer_availability / 100)
    best = _Estimate(1, "no partition has both pending and rate: 1", {})
    for part in obs.partitions:
        p = float(part.pending or 0)
        r = float(part.rate or 0)
        if p == 0 or r == 0:
            if p > 0 and r == 0:
                # Deliberate: a stalled partition keeps the ready replicas (MonoVertex behaviour).
                d = max(ready, 1)
                reason = f"pending {_fmt(p)} but no progress over the lookback: hold {d}"
                inputs = {"pending": p, "rate": r, "ready": ready, "model": "stalled"}
                if d > best.desired:
                    best = _Estimate(d, reason, inputs)
            continue
        if obs.kind == VertexKind.SOURCE or p <= buffer_length - target_available:
            raw = (p / r) / t * ready
            if not raw <= p:  # also catches inf from a vanishing rate: the cap at pending applies anyway
                raw = p
            d = int(round_half_away(raw))
            model = "time"
            reason = f"pending {_fmt(p)} at {_fmt(r)}/s over {ready} replicas, target {_fmt(t)} s"
        elif p >= limit:
            d = obs.replicas + scale.replicas_per_scale_up
            model = "buffer-full"
            reason = (
                f"buffer pending {_fmt(p)} at its limit {limit}: "
                f"{obs.replicas} + {scale.replicas_per_scale_up}"
            )
        else:
            contribution = (limit - p) / ready
            d = int(round_half_away(target_available / contribution))
            model = "buffer"
            reason = (
                f"buffer pending {_fmt(p)} of limit {limit}, target available {target_available}, "
                f"{_fmt(contribution)} free per replica over {ready} replicas"
            )
        floor_note = ""
        if d == 0:
            d = 1
            floor_note = " (floored at 1)"
        if p > 0 and d > p:
            d = int(p)
            floor_note = f" (capped at pending {int(p)})"
        inputs = {
            "partition": part.name,
            "pending": p,
            "rate": r,
            "ready": ready,
            "model": model,
            "targetProcessingSeconds": t,
        }
        if model != "time":
            inputs |= {"bufferLengthLimit": limit, "targetAvailableBufferLength": target_available}
        if d > best.desired or not best.inputs:
            best = _Estimate(d, f"{reason} → {d}{floor_note}", inputs)
    return best


def _hold(
    obs: VertexObservation,
    now: float,
    rule: Rule,
    reason: str,
    recommended: int | None = None,
    inputs: dict[str, object] | None = None,
) -> Decision:
    return Decision(obs.vertex, now, obs.replicas, obs.replicas, rule, reason, inputs or {}, recommended)


def _move(
    obs: VertexObservation,
    now: float,
    desired: int,
    rule: Rule,
    reason: str,
    recommended: int | None = None,
    inputs: dict[str, object] | None = None,
) -> Decision:
    return Decision(obs.vertex, now, obs.replicas, desired, rule, reason, inputs or {}, recommended)


def _step_toward(
    scale: NumaflowScale, obs: VertexObservation, now: float, target: int, since: float, rule: Rule, why: str
) -> Decision:
    """Move toward ``target`` by at most one step, respecting the direction's cooldown."""
    current = obs.replicas
    if target > current:
        step = min(target - current, scale.replicas_per_scale_up)
        if since < scale.scale_up_cooldown_seconds:
            return _hold(
                obs,
                now,
                Rule.SCALE_UP_COOLDOWN,
                f"{why}; scale-up cooldown: last scaled {since:.0f} s ago "
                f"< {scale.scale_up_cooldown_seconds:.0f} s",
                target,
                {"target": target},
            )
        return _move(obs, now, current + step, rule, f"{why}: +{step}", target, {"target": target})
    step = min(current - target, scale.replicas_per_scale_down)
    if since < scale.scale_down_cooldown_seconds:
        return _hold(
            obs,
            now,
            Rule.SCALE_DOWN_COOLDOWN,
            f"{why}; scale-down cooldown: last scaled {since:.0f} s ago "
            f"< {scale.scale_down_cooldown_seconds:.0f} s",
            target,
            {"target": target},
        )
    return _move(obs, now, current - step, rule, f"{why}: −{step}", target, {"target": target})


def decide(
    scale: NumaflowScale,
    obs: VertexObservation,
    now: float,
    pressure: PressureCheck | None = None,
) -> Decision:
    """One evaluation of one vertex. See the module docstring for the order of the checks."""
    pressure = pressure or PressureCheck.none()
    current = obs.replicas
    since = now - obs.last_scaled_at

    if scale.disabled:
        return _hold(obs, now, Rule.DISABLED, "autoscaling is disabled for this vertex")
    if not obs.running:
        return _hold(obs, now, Rule.NOT_RUNNING, "vertex is not running")
    shortest = min(scale.scale_up_cooldown_seconds, scale.scale_down_cooldown_seconds)
    if since < shortest:
        return _hold(
            obs,
            now,
            Rule.COOLDOWN,
            f"last scaled {since:.0f} s ago, within both cooldowns (≥ {shortest:.0f} s)",
            None,
            {"sinceLastScaled": since},
        )
    if obs.desired_replicas is not None and obs.desired_replicas != current:
        return _hold(
            obs,
            now,
            Rule.CONVERGING,
            f"{current} replicas running, {obs.desired_replicas} requested: waiting",
            None,
            {"requested": obs.desired_replicas},
        )

    low, high = scale.min, scale.max
    if obs.kind == VertexKind.SOURCE and scale.cron is not None:
        active = scale.cron.active_bounds(now)
        if active is not None:
            index, low, high = active
            window = f"cron window {index} [{low}, {high}]"
            if current < low:
                return _step_toward(scale, obs, now, low, since, Rule.CRON_MIN, f"{window}: below min")
            if current > high:
                return _step_toward(scale, obs, now, high, since, Rule.CRON_MAX, f"{window}: above max")

    if low == high:
        if current != low:
            return _move(obs, now, low, Rule.INTO_BOUNDS, f"min = max = {low}: set to {low}", low)
        return _hold(obs, now, Rule.FIXED, f"min = max = {low}: fixed replica count")

    if obs.kind != VertexKind.SOURCE and not obs.buffers:
        return _hold(obs, now, Rule.BUFFER_UNAVAILABLE, "no information about the input buffer")

    if current == 0:
        if low > 0:
            return _move(obs, now, low, Rule.INTO_BOUNDS, f"at 0, below min {low}: set to {low}", low)
        if obs.kind != VertexKind.SOURCE:
            waiting = sum(b.pending for b in obs.buffers)
            if waiting > 0:
                return _move(
                    obs,
                    now,
                    1,
                    Rule.WAKE_ON_PENDING,
                    f"{waiting} messages in the buffer: wake to 1",
                    1,
                    {"pending": waiting},
                )
            return _hold(obs, now, Rule.ZERO_WAIT, "at 0 and the buffer is empty", None, {"pending": 0})
        if since >= scale.zero_replica_sleep_seconds:
            return _move(
                obs,
                now,
                1,
                Rule.PEEK,
                f"at 0 for {since:.0f} s ≥ zeroReplicaSleepSeconds "
                f"{scale.zero_replica_sleep_seconds:.0f}: peek with 1",
                1,
            )
        return _hold(
            obs,
            now,
            Rule.ZERO_WAIT,
            f"at 0 for {since:.0f} s < zeroReplicaSleepSeconds {scale.zero_replica_sleep_seconds:.0f}",
        )

    if obs.ready_replicas == 0:
        return _hold(obs, now, Rule.NOT_READY, f"{current} replicas, none ready yet")

    partitions = obs.partitions
    if not partitions or not all([p.available for p in partitions]):
        missing = [p.name for p in obs.partitions if not p.available] or ["(no partitions)"]
        return _hold(
            obs,
            now,
            Rule.METRICS_UNAVAILABLE,
            f"rate or pending not available for {', '.join(missing)}: leave alone",
        )

    total_pending = sum(float(p.pending or 0) for p in obs.partitions)
    total_rate = sum(float(p.rate or 0) for p in obs.partitions)
    if total_pending == 0 and total_rate == 0:
        estimate = _Estimate(0, "no pending and no processing over the lookback → 0", {})
    else:
        estimate = desired_replicas(scale, obs)
    desired = estimate.desired
    inputs: dict[str, object] = {
        "totalPending": total_pending,
        "totalRate": total_rate,
        "ready": obs.ready_replicas,
        **estimate.inputs,
    }

    if obs.rate_limit_max is not None:
        max_rate = obs.rate_limit_max * (obs.read_batch_size if obs.kind == VertexKind.SOURCE else 1)
        if math.ceil(total_rate) >= max_rate and desired > current:
            return _hold(
                obs,
                now,
                Rule.RATE_LIMITED,
                f"rate {total_rate:.0f}/s at the rate limit {max_rate:.0f}/s: no scale-up (wanted {desired})",
                inputs,
            )

    clamped = min(max(desired, low), high)
    bounds_note = f" (clamped to [{low}, {high}])" if clamped != desired else ""
    reason = f"{estimate.reason}{bounds_note}"

    if current > high or current < low:
        return _move(
            obs,
            now,
            clamped,
            Rule.INTO_BOUNDS,
            f"{current} outside [{low}, {high}]; {reason}",
            clamped,
            inputs,
        )

    if clamped < current:
        step = min(current - clamped, scale.replicas_per_scale_down)
        if since < scale.scale_down_cooldown_seconds:
            return _hold(
                obs,
                now,
                Rule.SCALE_DOWN_COOLDOWN,
                f"{reason}; scale-down cooldown: last scaled {since:.0f} s ago "
                f"< {scale.scale_down_cooldown_seconds:.0f} s",
                clamped,
                inputs,
            )
        target = current - step
        rule = Rule.SCALE_TO_ZERO if target == 0 else Rule.SCALE_DOWN
        step_note = f" (step −{step} of {current - clamped})" if step < current - clamped else ""
        return _move(obs, now, target, rule, f"{reason}{step_note}", clamped, inputs)

    if clamped > current:
        if pressure.level == Pressure.DIRECT:
            if current > low and current > 1:
                return _move(
                    obs,
                    now,
                    current - 1,
                    Rule.BACK_PRESSURE_DIRECT,
                    f"wanted {clamped} but {pressure.reason}: −1",
                    clamped,
                    inputs | {"pressureBuffer": pressure.buffer},
                )
            return _hold(
                obs,
                now,
                Rule.BACK_PRESSURE_AT_FLOOR,
                f"wanted {clamped} but {pressure.reason}; already at max(min, 1): hold",
                clamped,
                inputs,
            )
        if pressure.level == Pressure.DOWNSTREAM:
            return _hold(
                obs,
                now,
                Rule.BACK_PRESSURE_DOWNSTREAM,
                f"wanted {clamped} but {pressure.reason}: hold",
                clamped,
                inputs | {"pressureBuffer": pressure.buffer},
            )
        step = min(clamped - current, scale.replicas_per_scale_up)
        if since < scale.scale_up_cooldown_seconds:
            return _hold(
                obs,
                now,
                Rule.SCALE_UP_COOLDOWN,
                f"{reason}; scale-up cooldown: last scaled {since:.0f} s ago "
                f"< {scale.scale_up_cooldown_seconds:.0f} s",
                clamped,
                inputs,
            )
        step_note = f" (step +{step} of {clamped - current})" if step < clamped - current else ""
        return _move(obs, now, current + step, Rule.SCALE_UP, f"{reason}{step_note}", clamped, inputs)

    return _hold(obs, now, Rule.STEADY, f"{reason}: already at {current}", clamped, inputs)
