"""What Numaflow's models ask for, before bounds, steps and cooldowns: ``desiredReplicas()``.

Per partition the maximum wins, starting from 1: the **time model**
``round((pending / rate) / targetProcessingSeconds × ready)`` for sources, and for UDFs/sinks while
``pending ≤ bufferLength − targetAvailableBufferLength``; otherwise the **buffer model**
``round(targetAvailable / ((limit − pending) / ready))``, or ``replicas + replicasPerScaleUp`` once
pending reaches the limit. Rounding is half away from zero; the result is floored at 1 and capped
at pending. No pending and no processing at all over the lookback asks for 0 (the same answer
:func:`tidal.scaling.numaflow.decide` acts on).

Reasons say ``avg pending``: the pending the models use is the lookback average (Numaflow's),
not the count of this instant, which the live view shows as "pending now".

Deliberate difference (also in ``docs/scaling.md``): **a stalled partition holds.** Upstream skips a
partition with pending > 0 and rate 0, so a stuck vertex is scaled *down*, to 1. Tidal votes to
keep the current replicas, as Numaflow's MonoVertex scaler does: a stall is not evidence that
fewer replicas suffice, whether or not all of them are ready.

The observation types (:class:`VertexObservation` and its parts) live here too: they are what
the models read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from tidal.scaling.limits import DEFAULT_READ_BATCH_SIZE, usable_length
from tidal.scaling.numaflow_scale import NumaflowScale
from tidal.scaling.windows import round_half_away

__all__ = [
    "BufferInfo",
    "Estimate",
    "PartitionMetrics",
    "VertexKind",
    "VertexObservation",
    "desired_replicas",
    "estimate",
    "estimate_inputs",
    "estimate_reason",
]


class VertexKind(StrEnum):
    SOURCE = "source"
    UDF = "udf"
    SINK = "sink"
    MONOVERTEX = "monovertex"  # source, transformer and sink in one: Numaflow's MonoVertex rules

    @property
    def reads_source(self) -> bool:
        """A source or a MonoVertex: scaled on its source's pending (the time model), peeks
        from zero, has no input buffer."""
        return self in (VertexKind.SOURCE, VertexKind.MONOVERTEX)


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
        return usable_length(self.max_length, self.usage_limit)


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
    started_at: float | None = None  # when the controller first saw it: the down cooldown starts there
    sink_retried_share: float | None = None  # of its sink's writes retried over the lookback
    throttled: bool = False  # its rate limit held a micro-batch back in the last few seconds


class Estimate(NamedTuple):
    """What the time or buffer model asks for, before bounds, steps and cooldowns."""

    desired: int
    reason: str
    inputs: dict[str, object]


def _fmt(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.3g}"


class Raw(NamedTuple):
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


_NO_ESTIMATE = Raw(1, "none", "", 0.0, 0.0, 0, "", 0, 0)


def _new_raw(fields: tuple[int, str, str, float, float, int, str, int, int]) -> Raw:
    # tuple.__new__ skips the NamedTuple's Python-level __new__: a third of _estimate's cost.
    return tuple.__new__(Raw, fields)


def zero(obs: VertexObservation) -> Raw:
    """The estimate of an idle vertex: 0."""
    return Raw(0, "zero", "", 0.0, 0.0, obs.ready_replicas, "", 0, 0)


def _idle(obs: VertexObservation) -> bool:
    """No pending and no processing on any partition over the lookback (all available)."""
    for _, rate, pending in obs.partitions:
        if rate or pending:
            return False
    return bool(obs.partitions)


def estimate(scale: NumaflowScale, obs: VertexObservation) -> Raw:
    """Numaflow ``desiredReplicas()`` (post-#2996): the max over partitions, starting from 1."""
    ready = obs.ready_replicas
    t = scale.target_processing_seconds
    buffer_length = limit = target_available = 0
    source = obs.kind.reads_source
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
                # Deliberate: a stalled partition keeps the current replicas (MonoVertex behaviour).
                d = max(obs.replicas, 1)
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


def estimate_reason(raw: Raw, scale: NumaflowScale, replicas: int) -> str:
    p, r, ready = raw.pending, raw.rate, raw.ready
    model = raw.model
    if model == "none":
        return "no partition has both pending and rate: 1"
    if model == "zero":
        return "no pending and no processing over the lookback → 0"
    if model == "stalled":
        return f"avg pending {_fmt(p)} but no progress over the lookback: hold {raw.desired}"
    if model == "time":
        why = (
            f"avg pending {_fmt(p)} at {_fmt(r)}/s over {ready} replicas, "
            f"target {_fmt(scale.target_processing_seconds)} s"
        )
    elif model == "buffer-full":
        step = scale.replicas_per_scale_up
        why = f"buffer avg pending {_fmt(p)} at its limit {raw.limit}: {replicas} + {step}"
    else:
        why = (
            f"buffer avg pending {_fmt(p)} of limit {raw.limit}, target available {raw.target_available}, "
            f"{_fmt((raw.limit - p) / ready)} free per replica over {ready} replicas"
        )
    return f"{why} → {raw.desired}{raw.note}"


def estimate_inputs(raw: Raw, scale: NumaflowScale) -> dict[str, object]:
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
    'avg pending 60000 at 10000/s over 2 replicas, target 3 s → 4'
    """
    raw = zero(obs) if _idle(obs) else estimate(scale, obs)
    return Estimate(raw.desired, estimate_reason(raw, scale, obs.replicas), estimate_inputs(raw, scale))
