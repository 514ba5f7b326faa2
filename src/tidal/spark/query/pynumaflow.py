"""pynumaflow handlers, unchanged, as Tidal steps: no gRPC server, no sidecar, in Spark's workers.

A Numaflow user's Python UDF is written against Numaflow's SDK (``pynumaflow``): a function
``handler(keys, datum) -> Messages``, a ``Mapper``, ``MapStreamer`` or ``SourceTransformer``
subclass, or an ``async`` generator for a map stream. Numaflow runs it in a container behind a
gRPC server; Tidal calls it directly in the task that holds the message (``udf: {pynumaflow:
module:handler}``). The same module still starts its own server under ``__main__``, so one file
runs on both.

What the handler gets is a pynumaflow ``Datum``:

- ``value``: the payload; ``keys``: the keys the message came with (the ones the handler
  upstream set on it, carried through the buffers; ``[]`` when none did);
- ``event_time``: the message's source time (when its source produced it);
- ``watermark``: the earliest source time in the handler's micro-batch. Numaflow's watermark
  is the earliest event time still to come from upstream; on a buffer read in order this is the
  closest Tidal has, and it never runs ahead of a message the handler has not seen;
- ``headers``: ``{}``.

A sink handler is a sink (:mod:`tidal.spark.sinks.pynumaflow`); a ``Sourcer`` a source
(:mod:`tidal.spark.sources.pynumaflow`).

What it returns (``Messages``, or the messages an async generator yields) becomes the vertex's
output: each ``Message``'s value and keys (and a ``SourceTransformer`` message's ``event_time``,
which becomes its source time), with its tags for conditional forwarding
(:mod:`tidal.spec.routing`); ``Message.to_drop()`` is dropped and counted.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from tidal.spark.batch.clients import bases, built, collect, run_async

__all__ = ["datums", "map_handler"]

_CLASSES = ("Mapper", "MapStreamer", "SourceTransformer")


def map_handler(obj: Any, path: str) -> Callable[[Any], Iterable[Any]]:
    """``obj`` (a function, a handler class or an instance) as ``call(datum) -> messages``.

    A class is built with no arguments, as Numaflow's examples build theirs before handing them
    to the server. ``path`` names the spec field in errors."""
    obj = built(obj, path)
    names = {name.rsplit(".", 1)[-1] for name in bases(obj) if name.startswith("pynumaflow.")}
    fn = obj.handler if names & set(_CLASSES) else obj
    if not callable(fn):
        raise TypeError(f"{path}: {type(obj).__name__} is not a pynumaflow handler (a function or a Mapper)")
    if inspect.isasyncgenfunction(fn):
        return lambda datum: run_async(collect(fn(list(datum.keys), datum)))
    if inspect.iscoroutinefunction(fn):
        return lambda datum: run_async(fn(list(datum.keys), datum))
    return lambda datum: fn(list(datum.keys), datum)


def datums(
    payloads: list[bytes], times: list[float] | None, keys: list[list[str] | None] | None = None
) -> list[Any]:
    """A pynumaflow ``Datum`` per message: its payload and keys, its source time as the event
    time, and the batch's earliest source time as the watermark."""
    from pynumaflow.mapper import Datum

    now = datetime.now(UTC).timestamp()
    stamps = times if times is not None else [now] * len(payloads)
    watermark = datetime.fromtimestamp(min(stamps, default=now), UTC)
    key_lists = keys if keys is not None else [None] * len(payloads)
    return [
        Datum(
            keys=list(k or []),
            value=value,
            event_time=datetime.fromtimestamp(t, UTC),
            watermark=watermark,
            headers={},
        )
        for value, t, k in zip(payloads, stamps, key_lists, strict=True)
    ]
