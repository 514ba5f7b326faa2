"""Numaflow's example UDFs as pynumaflow handlers: what its docs' and examples' images run.

Numaflow's example pipelines name container images (``quay.io/numaio/numaflow-go/map-cat``, …)
whose code lives in numaflow-go's ``examples/``. These are the same functions written against
Numaflow's Python SDK, so a manifest that names the image runs on Tidal unchanged
(:mod:`tidal.spec.manifest` maps each image to its handler here), and a user can read what each one does.
Each is a plain ``handler(keys, datum) -> Messages``, as pynumaflow's examples write them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

from pynumaflow.mapper import Datum, Message, Messages
from pynumaflow.sinker import Datum as SinkDatum
from pynumaflow.sinker import Response, Responses

_LOGGER = logging.getLogger(__name__)

__all__ = ["cat", "even_odd", "filter_id", "flatmap", "log_sink", "number", "retry"]


def cat(keys: list[str], datum: Datum) -> Messages:
    """``map-cat``: the message as it came."""
    return Messages(Message(datum.value, keys=keys))


def even_odd(keys: list[str], datum: Datum) -> Messages:
    """``map-even-odd``: an integer payload tagged ``even-tag`` or ``odd-tag`` (keyed ``even`` or
    ``odd``); anything that is not an integer is dropped."""
    try:
        num = int(datum.value.decode())
    except (UnicodeDecodeError, ValueError):
        return Messages(Message.to_drop())
    if num % 2 == 0:
        return Messages(Message(datum.value, keys=["even"], tags=["even-tag"]))
    return Messages(Message(datum.value, keys=["odd"], tags=["odd-tag"]))


def flatmap(keys: list[str], datum: Datum) -> Messages:
    """``map-flatmap``: one message per comma-separated part."""
    return Messages(*(Message(part.encode()) for part in datum.value.decode().split(",")))


def filter_id(keys: list[str], datum: Datum) -> Messages:
    """``map-filter-id``: JSON messages whose ``id`` is below 100, as the example's expression
    ``int(json(payload).id) < 100`` keeps them; anything else is dropped."""
    try:
        keep = int(json.loads(datum.value)["id"]) < 100
    except (ValueError, KeyError, TypeError):
        keep = False
    return Messages(Message(datum.value, keys=keys) if keep else Message.to_drop())


_counts: dict[bytes, int] = {}
SUCCESS_ITERATION = 3


def retry(keys: list[str], datum: Datum) -> Messages:
    """``map-retry``: a message is tagged ``retry`` until it has been seen three times, then
    passed on (numaflow-go's example keeps the counts in memory, per process, as this does)."""
    seen = _counts.get(datum.value, 0) + 1
    if seen >= SUCCESS_ITERATION:
        _counts.pop(datum.value, None)
        return Messages(Message(datum.value))
    _counts[datum.value] = seen
    return Messages(Message(datum.value, tags=["retry"]))


def number(keys: list[str], datum: Datum) -> Messages:
    """Tidal's generator's message (``gen 000000000042 …``) as its number (``42``): what
    Numaflow's HTTP examples post, for pipelines fed by the generator."""
    parts = datum.value.split()
    return Messages(Message(str(int(parts[1])).encode() if len(parts) > 1 else datum.value))


def log_sink(datums: Iterator[SinkDatum]) -> Responses:
    """numaflow-python's ``examples/sink/log`` (the function form): logs each message, all succeed."""
    responses = Responses()
    for msg in datums:
        _LOGGER.info("User Defined Sink %s", msg.value.decode("utf-8", "replace"))
        responses.append(Response.as_success(msg.id))
    return responses
