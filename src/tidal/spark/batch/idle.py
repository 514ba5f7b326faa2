"""Idle watermarks as control rows in a reduce's input buffer, written by its reader on the driver.

Numaflow moves an idle source's watermark by publishing it to the ISB's watermark store. Tidal's
reduce watermark is Spark's (the latest event time each input sent, minus the delay), so the moved
watermark travels as a **control row**: a message in the reduce's own input buffer whose event
time is the new value (:func:`tidal.scaling.idle.step`), whose id is ``<input>:~idle@<ms>`` (so it
counts as that input's, :mod:`tidal.spark.query.reduce`) and whose key is :data:`CONTROL_KEY`. Spark's
watermark moves with it; the aggregation puts it in windows of a key of its own, which the writer
skips, so no handler, sink or count sees it. Being in the buffer, it is replayed with its batch
after a crash: a replay closes the same windows (exactly once holds).

**A join** (several edges into the reduce) has a watermark per input, Spark's global one their
minimum (:func:`tidal.spark.query.reduce.plan_reduce`). Spark ignores an input that sent no row
since the query started, so each start seeds every input with a control row at event time 0: a
slow input then holds the watermark back until it sends, as Numaflow's does.

Why the aggregation keeps it instead of a filter: Spark's optimizer pushes a filter that does not
read the event-time column below ``withWatermark``, and the control rows would then never move the
watermark; a row under a key no user can write needs no such care.

:class:`tidal.spark.batch.idle_tracker.IdleTracker` lives in the reduce's reader (one per
query): at every trigger it notes which inputs sent data (reading the new rows' ids and event
times), asks whether anything waits upstream of each input, steps the idle rule and appends the
control rows. Its state (each input's latest event time, the vertex's latest data time) is kept
in ``<run>/idle/<vertex>.json`` so a restart goes on from where it was; lost, an input simply
starts again from its next message.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidal.scaling import idle

__all__ = ["CONTROL_KEY", "CONTROL_MARK", "IdleWatch", "Upstream", "control_id", "is_control"]

CONTROL_MARK = ":~idle@"  # in a control row's id: "<input>:~idle@<event time ms>"
CONTROL_KEY = "\x00idle"  # a control row's key: no message a user writes has it


def control_id(origin: str, t: float) -> str:
    return f"{origin}{CONTROL_MARK}{round(t * 1000)}"


def is_control(message_id: str) -> bool:
    return CONTROL_MARK in message_id


@dataclass(frozen=True, slots=True)
class Upstream:
    """One input of a reduce (the vertex of an edge into it) and what must be empty before it
    is idle: the input buffers of it and of every vertex upstream of it, and their sources."""

    origin: str
    buffers: tuple[str, ...]
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IdleWatch:
    """What a reduce's reader needs for its inputs' watermarks: ``params`` (None: no
    ``idleSource``, only a join's seeds) to move them when they go quiet."""

    params: idle.IdleParams | None
    span: float  # window length + allowedLateness + maxDelay: what closes every window of a time
    inputs: tuple[Upstream, ...]
