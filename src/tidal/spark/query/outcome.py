"""What a UDF's batch became: its outputs, where each came from, their tags, keys and event times.

:class:`Outcome` is what :class:`tidal.spark.query.udf.Transform` hands the writer: Arrow arrays of the
outputs, the dead letters, and, per output, what the function said about it beyond its payload
(tags for conditional forwarding, keys, an event time). What it did not say, each output keeps
from the input it came from (``origin``). :func:`output` turns one value a function returned
(bytes, str, or a message with ``value`` and ``tags``, Tidal's or pynumaflow's) into that form;
:class:`Collected` gathers the outputs message by message on the careful path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tidal.isb.segments import KEYS

__all__ = ["Collected", "Outcome", "Output", "Switch", "as_bytes", "output"]


def _empty_ids() -> pa.Array:
    return pa.array([], pa.string())


def _empty_payloads() -> pa.Array:
    return pa.array([], pa.binary())


@dataclass
class Outcome:
    """What a batch became: messages to write on (Arrow arrays) and dead letters ``(id, payload, error)``."""

    ids: pa.Array = field(default_factory=_empty_ids)
    payloads: pa.Array = field(default_factory=_empty_payloads)
    dead: list[tuple[str, bytes, str]] = field(default_factory=list)
    # The input message each output came from (its index in the batch); None: output i is input i.
    origin: pa.Array | None = None
    # Each output's tags (conditional forwarding, tidal.spec.routing); None: no output has any.
    tags: list[tuple[str, ...]] | None = None
    dropped: int = 0  # outputs tagged DROP: gone, counted
    # Each output's keys where its function set them (None in the list: its input's); None: all
    # outputs keep their input's keys.
    keys: list[list[str] | None] | None = None
    # Each output's event time where its function set one (a pynumaflow SourceTransformer's
    # Message(event_time=...)), in seconds; None in the list or for all: the input's.
    event_times: list[float | None] | None = None

    def _inherit(self, inputs: pa.Array) -> pa.Array:
        return inputs if self.origin is None else inputs.take(self.origin)

    def times(self, inputs: pa.Array) -> pa.Array:
        """The outputs' source times: each output keeps its input's (``inputs``, one per input),
        unless its function gave it an event time."""
        inherited = self._inherit(inputs)
        if self.event_times is None:
            return inherited
        old = inherited.to_pylist()
        return pa.array(
            [t if t is not None else o for t, o in zip(self.event_times, old, strict=True)], pa.float64()
        )

    def keys_of(self, inputs: pa.Array | None) -> pa.Array | None:
        """The outputs' keys: what the function set, else the input's (``inputs``, one per
        input; None: the inputs have no keys)."""
        inherited = None if inputs is None else self._inherit(inputs)
        if self.keys is None:
            return inherited
        old = inherited.to_pylist() if inherited is not None else [None] * len(self.keys)
        return pa.array([k if k is not None else o for k, o in zip(self.keys, old, strict=True)], KEYS)


def as_bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"a UDF must return bytes or str, got {type(value).__name__}")


# A payload, or a payload with its tags and its keys (None: the input's).
Output = bytes | tuple[bytes, tuple[str, ...], list[str] | None, float | None]


def output(value: object) -> Output:
    """One output of a UDF: bytes or str, or a message with tags and keys (:class:`tidal.Message`,
    pynumaflow's ``Message``: anything with ``value`` and ``tags``)."""
    if isinstance(value, bytes | str | bytearray | memoryview):
        return as_bytes(value)
    payload, tags = getattr(value, "value", None), getattr(value, "tags", None)
    if payload is None or tags is None or isinstance(tags, str | bytes):
        raise TypeError(f"a UDF must return bytes, str or a Message, got {type(value).__name__}")
    keys = getattr(value, "keys", None)
    moment = getattr(value, "event_time", None)  # a SourceTransformer's Message assigns the event time
    when = None if moment is None else _seconds(moment)
    return (
        as_bytes(payload),
        tuple(str(t) for t in tags),
        None if keys is None else [str(k) for k in keys],
        when,
    )


def _seconds(moment: Any) -> float:
    if isinstance(moment, int | float):
        return float(moment)
    from datetime import UTC

    return float((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp())


class Switch(Exception):
    """The fast map loop met an output that is not plain bytes (a tagged message)."""

    def __init__(self, result: object) -> None:
        self.result = result


class Collected:
    """Outputs gathered message by message (the careful path): ids, payloads, dead letters."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.payloads: list[bytes] = []
        self.dead: list[tuple[str, bytes, str]] = []
        self.origin: list[int] = []
        self.tags: list[tuple[str, ...]] = []
        self.tagged = False  # some output had tags
        self.dropped = 0
        self.keys: list[list[str] | None] = []
        self.keyed = False  # some output's function set its keys
        self.event_times: list[float | None] = []
        self.timed = False  # some output's function set its event time

    def outcome(self) -> Outcome:
        return Outcome(
            pa.array(self.ids, pa.string()),
            pa.array(self.payloads, pa.binary()),
            self.dead,
            pa.array(self.origin, pa.int64()),
            self.tags if self.tagged else None,
            self.dropped,
            self.keys if self.keyed else None,
            self.event_times if self.timed else None,
        )
