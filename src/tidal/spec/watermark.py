"""``watermark:`` — how a reduce's watermark moves when its inputs go quiet, as Numaflow's.

A reduce vertex closes a window when its watermark passes the window's end. Tidal's watermark is
Spark's (the latest event time each input has sent, minus the delay), which moves only when a
message comes: a window behind a quiet source, or a source scaled to zero, would stay open. With
``idleSource``, an input that sent nothing for ``threshold`` (and has nothing waiting upstream) has
its watermark moved on by ``incrementBy`` every ``stepInterval``, never past now − ``maxDelay``
(:mod:`tidal.scaling.idle`, :mod:`tidal.spark.query.idle`).

- ``maxDelay``: how long past a message's event time the watermark waits (Numaflow's default
  0s): late data within it is on time. Tidal adds it to every reduce's ``allowedLateness``.
- ``idleSource.threshold``: how long an input must send nothing before it is idle (required).
- ``idleSource.incrementBy``: how far each idle step moves the input's watermark (required).
- ``idleSource.stepInterval``: the least time between two steps (default 0s: every trigger).
- ``idleSource.initSourceDelay``: an input that never sent a message holds a join's watermark
  back until this long after the start, when its watermark becomes now (unset: for good).

Numaflow's ``disabled`` is not a Tidal field: ``tidal convert`` lists it as ignored.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from tidal.scaling.durations import seconds
from tidal.spec.base import Model

__all__ = ["IdleSourceSpec", "WatermarkSpec"]


class IdleSourceSpec(Model):
    """``watermark.idleSource``: Numaflow's idle-source watermark progression."""

    threshold: float = Field(gt=0)
    increment_by: float = Field(gt=0)
    step_interval: float = Field(0.0, ge=0)
    init_source_delay: float | None = Field(None, ge=0)

    @field_validator("*", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return seconds(value) if value is not None else value


class WatermarkSpec(Model):
    """``watermark:`` — ``maxDelay`` and ``idleSource`` (None: a quiet input holds its watermark)."""

    max_delay: float = Field(0.0, ge=0)
    idle_source: IdleSourceSpec | None = None

    @field_validator("max_delay", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return seconds(value)
