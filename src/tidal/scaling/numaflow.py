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
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import NamedTuple

from tidal import errors
from tidal.scaling.backpressure import Pressure, PressureCheck
from tidal.scaling.cron import CronSpec
from tidal.scaling.decision import Decision, Inputs, Rule, Text
from tidal.scaling.rates import MAX_LOOKBACK_SECONDS
from tidal.scaling.windows import round_half_away

__all__ = [
    "DEFAULT_READ_BATCH_SIZE",
    "BufferInfo",
    "Estimate",
    "NumaflowScale",
    "PartitionMetrics",
    "VertexKind",
    "VertexObservation",
    "decide",
    "desired_replicas",
    "wake_from_zero",
    "wake_on_path",
]

DEFAULT_READ_BATCH_SIZE = 500


class VertexKind(StrEnum):
    SOURCE = "source"
    UDF = "udf"
    SINK = "sink"


# Enum members bound once: an attribute lookup on an Enum class costs ~0.1 µs, and the hot path
# of decide() made a dozen of them per vertex per tick (tidal bench scaling).
_SOURCE = VertexKind.SOURCE
_SCALE_UP = Rule.SCALE_UP
_SCALE_DOWN = Rule.SCALE_DOWN
_SCALE_TO_ZERO = Rule.SCALE_TO_ZERO
_STEADY = Rule.STEADY
_SCALE_UP_COOLDOWN = Rule.SCALE_UP_COOLDOWN
_SCALE_DOWN_COOLDOWN = Rule.SCALE_DOWN_COOLDOWN
_PRESSURE_NONE = Pressure.NONE
_PRESSURE_DIRECT = Pressure.DIRECT


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

    @property
    def shortest_cooldown(self) -> float:
        """The global cooldown (step 3): no decision at all within the shorter of the two."""
        up, down = self.scale_up_cooldown_seconds, self.scale_down_cooldown_seconds
        return up if up < down else down


class PartitionMetrics(NamedTuple):
    """Rate (messages/s over the lookback, all replicas) and averaged pending of one partition.

    ``None`` or a negative value means "not available".
    """

    name: str
    rate: float | None
    pending: float | None

    @property
    def available(self) -> bool:
        return self.rate is not None and self.pending is not None and self.rate >= 0 and self.pending >= 0


class BufferInfo(NamedTuple):
    """An owned input buffer (UDF/sink): limits and the *current* pending count (for the wake)."""

    name: str
    max_length: int
    usage_limit: float
    pending: int = 0

    @property
    def length_limit(self) -> int:
        return int(self.max_length * self.usage_limit)


@dataclass(slots=True)
class VertexObservation:
    """What the controller saw of one vertex at one tick.

    Treat it as a value (derive variants with ``dataclasses.replace``). It is not ``frozen``
    because a frozen dataclass's ``__init__`` costs three times as much, and the controller
    builds one per vertex per tick.
    """

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


class Estimate(NamedTuple):
    """What the time or buffer model asks for, before bounds, steps and cooldowns."""

    desired: int
    reason: str
    inputs: dict[str, object]


def _fmt(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.3g}"


class _Raw(NamedTuple):
    """The winning partition's numbers; rendered into words only when somebody reads them."""

    desired: int
    model: str  # "none" | "zero" | "stalled" | "time" | "buffer-full" | "buffer"
    partition: str
    pending: float
    rate: float
    ready: int
    note: str  # "", " (floored at 1)" or " (capped at pending N)"
    limit: int
    target_available: int


_NO_ESTIMATE = _Raw(1, "none", "", 0.0, 0.0, 0, "", 0, 0)


def _new_raw(fields: tuple[int, str, str, float, float, int, str, int, int]) -> _Raw:
    # tuple.__new__ skips the NamedTuple's Python-level __new__: a third of _estimate's cost.
    return tuple.__new__(_Raw, fields)


def _estimate(scale: NumaflowScale, obs: VertexObservation) -> _Raw:
    """Numaflow ``desiredReplicas()`` (post-#2996): the max over partitions, starting from 1."""
    ready = obs.ready_replicas
    t = scale.target_processing_seconds
    buffer_length = limit = target_available = 0
    source = obs.kind == _SOURCE
    if not source and obs.buffers:
        last = obs.buffers[-1]
        buffer_length = last.max_length
        limit = last.length_limit
        target_available = int(buffer_length * scale.target_buffer_availability / 100)
    best = _NO_ESTIMATE
    for name, rate, pending in obs.partitions:
        p = float(pending or 0)
        r = float(rate or 0)
        if p == 0 or r == 0:
            if p > 0 and r == 0:
                # Deliberate: a stalled partition keeps the ready replicas (MonoVertex behaviour).
                d = max(ready, 1)
                if d > best[0]:
                    best = _new_raw((d, "stalled", name, p, r, ready, "", limit, target_available))
            continue
        if source or p <= buffer_length - target_available:
            raw = (p / r) / t * ready
            if not raw <= p:  # also catches inf from a vanishing rate: the cap at pending applies anyway
                raw = p
            d = math.floor(raw + 0.5)  # round half away from zero; raw >= 0 here
            model = "time"
        elif p >= limit:
            d = obs.replicas + scale.replicas_per_scale_up
            model = "buffer-full"
        else:
            d = int(round_half_away(target_available / ((limit - p) / ready)))
            model = "buffer"
        note = ""
        if d == 0:
            d = 1
            note = " (floored at 1)"
        if p > 0 and d > p:
            d = int(p)
            note = f" (capped at pending {d})"
        if d > best[0] or best is _NO_ESTIMATE:
            best = _new_raw((d, model, name, p, r, ready, note, limit, target_available))
    return best


def _estimate_reason(raw: _Raw, scale: NumaflowScale, replicas: int) -> str:
    p, r, ready = raw.pending, raw.rate, raw.ready
    model = raw.model
    if model == "none":
        return "no partition has both pending and rate: 1"
    if model == "zero":
        return "no pending and no processing over the lookback → 0"
    if model == "stalled":
        return f"pending {_fmt(p)} but no progress over the lookback: hold {raw.desired}"
    if model == "time":
        why = (
            f"pending {_fmt(p)} at {_fmt(r)}/s over {ready} replicas, "
            f"target {_fmt(scale.target_processing_seconds)} s"
        )
    elif model == "buffer-full":
        why = f"buffer pending {_fmt(p)} at its limit {raw.limit}: {replicas} + {scale.replicas_per_scale_up}"
    else:
        why = (
            f"buffer pending {_fmt(p)} of limit {raw.limit}, target available {raw.target_available}, "
            f"{_fmt((raw.limit - p) / ready)} free per replica over {ready} replicas"
        )
    return f"{why} → {raw.desired}{raw.note}"


def _estimate_inputs(raw: _Raw, scale: NumaflowScale) -> dict[str, object]:
    if raw.model in ("none", "zero"):
        return {}
    inputs: dict[str, object] = {"pending": raw.pending, "rate": raw.rate, "ready": raw.ready}
    if raw.model == "stalled":
        inputs["model"] = "stalled"
        return inputs
    inputs = {"partition": raw.partition, **inputs, "model": raw.model}
    inputs["targetProcessingSeconds"] = scale.target_processing_seconds
    if raw.model != "time":
        inputs["bufferLengthLimit"] = raw.limit
        inputs["targetAvailableBufferLength"] = raw.target_available
    return inputs


def desired_replicas(scale: NumaflowScale, obs: VertexObservation) -> Estimate:
    """Numaflow ``desiredReplicas()``: the models' answer for this observation, explained.

    >>> obs = VertexObservation("in", VertexKind.SOURCE, replicas=2, ready_replicas=2,
    ...     last_scaled_at=0, partitions=(PartitionMetrics("p0", 10000, 60000),))
    >>> desired_replicas(NumaflowScale(target_processing_seconds=3), obs).reason
    'pending 60000 at 10000/s over 2 replicas, target 3 s → 4'
    """
    raw = _estimate(scale, obs)
    return Estimate(raw.desired, _estimate_reason(raw, scale, obs.replicas), _estimate_inputs(raw, scale))


def _hold(
    obs: VertexObservation,
    now: float,
    rule: Rule,
    reason: Text,
    recommended: int | None = None,
    inputs: Inputs | None = None,
) -> Decision:
    return Decision(obs.vertex, now, obs.replicas, obs.replicas, rule, reason, inputs, recommended)


def _move(
    obs: VertexObservation,
    now: float,
    desired: int,
    rule: Rule,
    reason: Text,
    recommended: int | None = None,
    inputs: Inputs | None = None,
) -> Decision:
    return Decision(obs.vertex, now, obs.replicas, desired, rule, reason, inputs, recommended)


def _cooldown_note(direction: str, since: float, cooldown: float) -> str:
    return f"scale-{direction} cooldown: last scaled {since:.0f} s ago < {cooldown:.0f} s"


def _step_toward(
    scale: NumaflowScale, obs: VertexObservation, now: float, target: int, since: float, rule: Rule, why: str
) -> Decision:
    """Move toward ``target`` by at most one step, respecting the direction's cooldown."""
    current = obs.replicas
    inputs = {"target": target}
    if target > current:
        step = min(target - current, scale.replicas_per_scale_up)
        cooldown = scale.scale_up_cooldown_seconds
        if since < cooldown:
            note = _cooldown_note("up", since, cooldown)
            return _hold(obs, now, _SCALE_UP_COOLDOWN, f"{why}; {note}", target, inputs)
        return _move(obs, now, current + step, rule, f"{why}: +{step}", target, inputs)
    step = min(current - target, scale.replicas_per_scale_down)
    cooldown = scale.scale_down_cooldown_seconds
    if since < cooldown:
        note = _cooldown_note("down", since, cooldown)
        return _hold(obs, now, _SCALE_DOWN_COOLDOWN, f"{why}; {note}", target, inputs)
    return _move(obs, now, current - step, rule, f"{why}: −{step}", target, inputs)


def decide(
    scale: NumaflowScale,
    obs: VertexObservation,
    now: float,
    pressure: PressureCheck | None = None,
) -> Decision:
    """One evaluation of one vertex. See the module docstring for the order of the checks.

    The hot path (a vertex with metrics, between its bounds) builds no string and no dict: the
    reason and the inputs are closures rendered when the decision is read or logged.
    """
    current = obs.replicas
    since = now - obs.last_scaled_at

    if scale.disabled:
        return _hold(obs, now, Rule.DISABLED, "autoscaling is disabled for this vertex")
    if not obs.running:
        return _hold(obs, now, Rule.NOT_RUNNING, "vertex is not running")
    shortest = scale.shortest_cooldown
    if since < shortest:
        return _hold(
            obs,
            now,
            Rule.COOLDOWN,
            f"last scaled {since:.0f} s ago, within both cooldowns (≥ {shortest:.0f} s)",
            None,
            {"sinceLastScaled": since},
        )
    requested = obs.desired_replicas
    if requested is not None and requested != current:
        return _hold(
            obs,
            now,
            Rule.CONVERGING,
            f"{current} replicas running, {requested} requested: waiting",
            None,
            {"requested": requested},
        )

    source = obs.kind == _SOURCE
    low, high = scale.min, scale.max
    if source and scale.cron is not None:
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

    if not source and not obs.buffers:
        return _hold(obs, now, Rule.BUFFER_UNAVAILABLE, "no information about the input buffer")

    if current == 0:
        return _decide_at_zero(scale, obs, now, since, low)

    if obs.ready_replicas == 0:
        return _hold(obs, now, Rule.NOT_READY, f"{current} replicas, none ready yet")

    partitions = obs.partitions
    total_pending = 0.0
    total_rate = 0.0
    for _, r, p in partitions:
        if p is None or r is None or p < 0 or r < 0:
            return _metrics_unavailable(obs, now)
        total_pending += p
        total_rate += r
    if not partitions:
        return _metrics_unavailable(obs, now)

    if total_pending == 0 and total_rate == 0:
        raw = _Raw(0, "zero", "", 0.0, 0.0, obs.ready_replicas, "", 0, 0)
    else:
        raw = _estimate(scale, obs)
    desired = raw.desired
    ready = obs.ready_replicas
    inputs = partial(_decision_inputs, raw, scale, total_pending, total_rate, ready, None)

    if obs.rate_limit_max is not None:
        max_rate = obs.rate_limit_max * (obs.read_batch_size if source else 1)
        if math.ceil(total_rate) >= max_rate and desired > current:
            return _hold(
                obs,
                now,
                Rule.RATE_LIMITED,
                f"rate {total_rate:.0f}/s at the rate limit {max_rate:.0f}/s: no scale-up (wanted {desired})",
                desired,
                inputs,
            )

    clamped = min(max(desired, low), high)
    if current > high or current < low:
        prefix = f"{current} outside [{low}, {high}]; "
        reason = partial(_decision_reason, raw, scale, current, low, high, prefix, "")
        return _move(obs, now, clamped, Rule.INTO_BOUNDS, reason, clamped, inputs)

    if clamped < current:
        gap = current - clamped
        step = min(gap, scale.replicas_per_scale_down)
        cooldown = scale.scale_down_cooldown_seconds
        if since < cooldown:
            suffix = f"; {_cooldown_note('down', since, cooldown)}"
            reason = partial(_decision_reason, raw, scale, current, low, high, "", suffix)
            return _hold(obs, now, _SCALE_DOWN_COOLDOWN, reason, clamped, inputs)
        target = current - step
        suffix = f" (step −{step} of {gap})" if step < gap else ""
        reason = partial(_decision_reason, raw, scale, current, low, high, "", suffix)
        rule = _SCALE_TO_ZERO if target == 0 else _SCALE_DOWN
        return _move(obs, now, target, rule, reason, clamped, inputs)

    if clamped > current:
        level = pressure.level if pressure is not None else _PRESSURE_NONE
        if level != _PRESSURE_NONE:
            assert pressure is not None
            return _back_pressure(obs, now, pressure, clamped, low, raw, scale, total_pending, total_rate)
        gap = clamped - current
        step = min(gap, scale.replicas_per_scale_up)
        cooldown = scale.scale_up_cooldown_seconds
        if since < cooldown:
            suffix = f"; {_cooldown_note('up', since, cooldown)}"
            reason = partial(_decision_reason, raw, scale, current, low, high, "", suffix)
            return _hold(obs, now, _SCALE_UP_COOLDOWN, reason, clamped, inputs)
        suffix = f" (step +{step} of {gap})" if step < gap else ""
        reason = partial(_decision_reason, raw, scale, current, low, high, "", suffix)
        return _move(obs, now, current + step, _SCALE_UP, reason, clamped, inputs)

    reason = partial(_decision_reason, raw, scale, current, low, high, "", f": already at {current}")
    return _hold(obs, now, _STEADY, reason, clamped, inputs)


def _decision_reason(
    raw: _Raw, scale: NumaflowScale, current: int, low: int, high: int, prefix: str, suffix: str
) -> str:
    """``[prefix]<the model's reason>[ (clamped to [low, high])][suffix]``, rendered on read."""
    clamped = min(max(raw.desired, low), high)
    bounds = f" (clamped to [{low}, {high}])" if clamped != raw.desired else ""
    return f"{prefix}{_estimate_reason(raw, scale, current)}{bounds}{suffix}"


def _decision_inputs(
    raw: _Raw,
    scale: NumaflowScale,
    total_pending: float,
    total_rate: float,
    ready: int,
    extra: dict[str, object] | None,
) -> dict[str, object]:
    inputs = {"totalPending": total_pending, "totalRate": total_rate, "ready": ready}
    inputs.update(_estimate_inputs(raw, scale))
    if extra:
        inputs.update(extra)
    return inputs


def _back_pressure(
    obs: VertexObservation,
    now: float,
    pressure: PressureCheck,
    clamped: int,
    low: int,
    raw: _Raw,
    scale: NumaflowScale,
    total_pending: float,
    total_rate: float,
) -> Decision:
    """Step 16: wanted more replicas, but a buffer downstream is (nearly) full."""
    current = obs.replicas
    ready = obs.ready_replicas
    with_buffer = {"pressureBuffer": pressure.buffer}
    if pressure.level == _PRESSURE_DIRECT:
        if current > low and current > 1:
            inputs = partial(_decision_inputs, raw, scale, total_pending, total_rate, ready, with_buffer)
            why = f"wanted {clamped} but {pressure.reason}: −1"
            return _move(obs, now, current - 1, Rule.BACK_PRESSURE_DIRECT, why, clamped, inputs)
        inputs = partial(_decision_inputs, raw, scale, total_pending, total_rate, ready, None)
        why = f"wanted {clamped} but {pressure.reason}; already at max(min, 1): hold"
        return _hold(obs, now, Rule.BACK_PRESSURE_AT_FLOOR, why, clamped, inputs)
    inputs = partial(_decision_inputs, raw, scale, total_pending, total_rate, ready, with_buffer)
    why = f"wanted {clamped} but {pressure.reason}: hold"
    return _hold(obs, now, Rule.BACK_PRESSURE_DOWNSTREAM, why, clamped, inputs)


def _metrics_unavailable(obs: VertexObservation, now: float) -> Decision:
    def reason() -> str:
        missing = [p.name for p in obs.partitions if not p.available] or ["(no partitions)"]
        return f"rate or pending not available for {', '.join(missing)}: leave alone"

    return _hold(obs, now, Rule.METRICS_UNAVAILABLE, reason)


def _decide_at_zero(
    scale: NumaflowScale, obs: VertexObservation, now: float, since: float, low: int
) -> Decision:
    """Step 8: a UDF/sink wakes on pending; a source peeks after ``zeroReplicaSleepSeconds``."""
    if low > 0:
        return _move(obs, now, low, Rule.INTO_BOUNDS, f"at 0, below min {low}: set to {low}", low)
    if obs.kind != _SOURCE:
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
    sleep = scale.zero_replica_sleep_seconds
    if since >= sleep:
        return _move(
            obs,
            now,
            1,
            Rule.PEEK,
            f"at 0 for {since:.0f} s ≥ zeroReplicaSleepSeconds {sleep:.0f}: peek with 1",
            1,
        )
    return _hold(obs, now, Rule.ZERO_WAIT, f"at 0 for {since:.0f} s < zeroReplicaSleepSeconds {sleep:.0f}")


def wake_on_path(scale: NumaflowScale, obs: VertexObservation, now: float, woken: str) -> Decision | None:
    """Wake a vertex at zero because ``woken``, upstream of it, just woke: Tidal's path wake-up.

    Without it, a chain at zero starts one vertex at a time: each wakes only when the first
    messages reach its buffer, so a cold start costs the sum of the start-up delays
    (``tidal bench decisions``: 28 s for three vertices that start in 8 s each). Waking the
    whole path together overlaps them. Numaflow has no such rule; Knative's activator serves a
    single revision. The woken vertex then counts as just scaled, so its scale-down cooldown
    keeps it up until the messages arrive.

    ``None`` when this does not apply (not at zero, disabled, or ``max`` is 0).
    """
    if scale.disabled or obs.replicas != 0:
        return None
    target = min(max(1, scale.min), scale.max)
    if target <= 0:
        return None
    return _move(
        obs,
        now,
        target,
        Rule.WAKE_ON_PATH,
        f"upstream {woken!r} woke: wake to {target} now, ahead of its messages",
        target,
        {"upstream": woken},
    )


def wake_from_zero(scale: NumaflowScale, obs: VertexObservation, now: float) -> Decision | None:
    """Tidal's activator for buffers: a vertex at 0 replicas with messages waiting wakes now.

    Deliberate differences from Numaflow:

    - In Numaflow the cooldown check comes first, so a UDF or sink scaled to zero a minute ago
      leaves its first new message waiting for up to 90 s. Knative's activator does not wait,
      and neither does Tidal.
    - A source at zero that *reports* pending (its ``pending()`` answers a positive number) wakes
      at once too. Numaflow peeks at a source only every ``zeroReplicaSleepSeconds``, because it
      cannot know; a source that can say so need not sleep. A source whose pending is not
      available still follows ``zeroReplicaSleepSeconds`` (in :func:`decide`).

    ``None`` when this does not apply (then call :func:`decide`).
    """
    if scale.disabled or obs.replicas != 0:
        return None
    if obs.kind == _SOURCE:
        reported = [p.pending for p in obs.partitions if p.pending is not None and p.pending > 0]
        waiting = int(sum(reported))
        where = "reported by the source"
    else:
        waiting = sum(b.pending for b in obs.buffers)
        where = "waiting"
    target = min(max(1, scale.min), scale.max)
    if waiting <= 0 or target <= 0:
        return None
    return _move(
        obs,
        now,
        target,
        Rule.WAKE_ON_PENDING,
        f"{waiting} message{'s' if waiting != 1 else ''} {where} at 0 replicas: "
        f"wake to {target} now (activator: no cooldown)",
        target,
        {"pending": waiting},
    )
