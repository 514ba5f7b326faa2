"""``udf.groupBy``: a reduce vertex's windows, as Numaflow's ``groupBy`` writes them.

A reduce vertex (``udf: {reduce: module:handler, groupBy: …}``) groups its messages by key (when
``keyed``) into windows of their event time (each message's source time) and calls the handler
once per key and window when the window closes:

- ``window.fixed.length``: back-to-back windows of that length;
- ``window.sliding.length`` and ``slide``: windows of ``length`` starting every ``slide``;
- ``window.session.timeout``: a key's window closes after that long without a message;
- ``streaming: true`` on a fixed or sliding window: the handler is pynumaflow's
  ``ReduceStreamer`` (its messages still come when the window closes, on Spark's append mode);
- ``window.accumulator.timeout``: Numaflow's accumulator window, one window per key that a
  pynumaflow ``Accumulator`` sees message by message and emits from when it likes; it closes
  once the watermark passes the key's latest event time plus ``timeout``
  (:mod:`tidal.spark.query.accumulator`);
- ``allowedLateness``: how long a window waits, past its end, for messages that come late.

Durations are Numaflow's, Go's (``60s``, ``500ms``, ``1m30s``, ``1h``), or a number of seconds
(:mod:`tidal.scaling.durations`).
``storage`` (Numaflow's PVC for the window state) is accepted and not used: Spark's state store,
in the run's checkpoint, holds the windows.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tidal.scaling.durations import seconds
from tidal.spec.base import Model

__all__ = ["AccumulatorWindow", "GroupBySpec", "WindowSpec"]


class _Timed(Model):
    @field_validator("*", mode="before")
    @classmethod
    def _duration(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name == "streaming":
            return value
        return seconds(value) if value is not None else value


class _Aligned(_Timed):
    """A fixed or sliding window. ``streaming: true`` is Numaflow's flag for a reducer that puts
    messages on its output while the window is open (pynumaflow's ``ReduceStreamer``); it must
    agree with the handler, as on Numaflow, where a mismatch leaves the vertex waiting for a server
    that never starts (:func:`tidal.spec.validate` checks it at start). On Spark's append mode a
    streaming window's handler still runs once per key and window, when the window closes
    (:mod:`tidal.spark.query.reduce_stream`)."""

    streaming: bool = False


class FixedWindow(_Aligned):
    length: float = Field(gt=0)


class SlidingWindow(_Aligned):
    length: float = Field(gt=0)
    slide: float = Field(gt=0)

    @model_validator(mode="after")
    def _slide_within(self) -> SlidingWindow:
        if self.slide > self.length:
            raise ValueError(
                f"slide {self.slide:g}s is longer than length {self.length:g}s: messages would fall "
                "between windows"
            )
        return self


class SessionWindow(_Timed):
    timeout: float = Field(gt=0)


class AccumulatorWindow(_Timed):
    """Numaflow's accumulator window: ``timeout`` of a key's inactivity, measured against the
    watermark (the window closes when the watermark passes the key's latest event time plus
    ``timeout``), Numaflow's only field."""

    timeout: float = Field(gt=0)


class WindowSpec(Model):
    """Exactly one of ``fixed``, ``sliding``, ``session``, ``accumulator``."""

    fixed: FixedWindow | None = None
    sliding: SlidingWindow | None = None
    session: SessionWindow | None = None
    accumulator: AccumulatorWindow | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> WindowSpec:
        chosen = [k for k in _KINDS if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(f"a window is exactly one of {', '.join(_KINDS)} (got {chosen or 'none'})")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in _KINDS if getattr(self, k) is not None)

    @property
    def streaming(self) -> bool:
        """``streaming: true`` on the fixed or sliding window (a ``ReduceStreamer``'s)."""
        aligned = self.fixed or self.sliding
        return aligned is not None and aligned.streaming


_KINDS = ("fixed", "sliding", "session", "accumulator")


class GroupBySpec(Model):
    window: WindowSpec
    keyed: bool = False
    allowed_lateness: float = Field(0.0, ge=0)
    storage: dict[str, Any] | None = None  # Numaflow's PVC: Spark's state store holds the windows here

    @field_validator("allowed_lateness", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return seconds(value)


class StatePartitionsSpec(Model):
    """``statePartitions: {min, max, cooldownSeconds}`` on a reduce vertex: Tidal moves its state
    between ``min`` and ``max`` partitions by itself (:mod:`tidal.scaling.state_partitions`; the
    vertex's ``partitions`` is the count it starts with). Numaflow has no such field: its reduce
    partitions are fixed. Without it a reduce vertex keeps its count unless moved by hand
    (``tidal scale RUN_DIR VERTEX --partitions N``)."""

    min: int = Field(1, ge=1, le=1024)
    max: int = Field(ge=1, le=1024)
    cooldown_seconds: float = Field(60.0, ge=0, le=86_400)  # the floor; a move's learnt pause raises it

    @model_validator(mode="after")
    def _ordered(self) -> StatePartitionsSpec:
        if self.min > self.max:
            raise ValueError(f"statePartitions: min {self.min} is above max {self.max}: make min <= max")
        return self
