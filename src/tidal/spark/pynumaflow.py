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

A sink handler (a ``Sinker`` or ``handler(datums) -> Responses``) gets the task's messages as
sink ``Datum`` objects, ``id`` the message's id. A response that is not a success fails the task, with
the handler's error: the micro-batch replays, so a pynumaflow sink is **at least once** (as
Numaflow's is), and the ids let it de-duplicate. ``Response.as_fallback`` is a failure too:
Tidal has no fallback sink.

A ``Sourcer`` (``source: {pynumaflow: module:Class}``) is read as a Tidal user source is:
``read_handler`` fills the staging buffer, ``ack_handler`` is called once the messages are stored
there, and ``pending_handler``'s count drives scaling (a negative count is "not available"). Its
offsets become the messages' ids (``<partition>:<offset>``), so a redelivered offset is stored
once. A message's ``event_time`` becomes its source time (a naive ``datetime`` is UTC).

What it returns (``Messages``, or the messages an async generator yields) becomes the vertex's
output: each ``Message``'s value and keys (and a ``SourceTransformer`` message's ``event_time``,
which becomes its source time), with its tags for conditional forwarding
(:mod:`tidal.spec.routing`); ``Message.to_drop()`` is dropped and counted.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

__all__ = ["PynumaflowSink", "SourcerSource", "datums", "map_handler"]

_loop: asyncio.AbstractEventLoop | None = None  # one per worker process, for async handlers


def _run(coro: Any) -> Any:
    global _loop  # noqa: PLW0603 - the worker's one loop, made on first use
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop.run_until_complete(coro)


async def _collect(stream: Any) -> list[Any]:
    return [message async for message in stream]


def _bases(obj: object) -> set[str]:
    kind = obj if isinstance(obj, type) else type(obj)
    return {f"{c.__module__}.{c.__qualname__}" for c in kind.__mro__}


_CLASSES = ("Mapper", "MapStreamer", "SourceTransformer")


def map_handler(obj: Any, path: str) -> Callable[[Any], Iterable[Any]]:
    """``obj`` (a function, a handler class or an instance) as ``call(datum) -> messages``.

    A class is built with no arguments, as Numaflow's examples build theirs before handing them
    to the server. ``path`` names the spec field in errors."""
    if isinstance(obj, type):
        try:
            obj = obj()
        except TypeError as exc:
            raise TypeError(
                f"{path}: {obj.__name__}() needs arguments ({exc}); name an instance instead"
            ) from None
    names = {name.rsplit(".", 1)[-1] for name in _bases(obj) if name.startswith("pynumaflow.")}
    fn = obj.handler if names & set(_CLASSES) else obj
    if not callable(fn):
        raise TypeError(f"{path}: {type(obj).__name__} is not a pynumaflow handler (a function or a Mapper)")
    if inspect.isasyncgenfunction(fn):
        return lambda datum: _run(_collect(fn(list(datum.keys), datum)))
    if inspect.iscoroutinefunction(fn):
        return lambda datum: _run(fn(list(datum.keys), datum))
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


class PynumaflowSink:
    """A pynumaflow sink handler as a Tidal sink (:func:`tidal.spark.sinks.build_sink`)."""

    takes_times = True  # the writer hands it the messages' source times

    def __init__(self, obj: Any, path: str) -> None:
        if isinstance(obj, type):
            obj = obj()
        names = {name.rsplit(".", 1)[-1] for name in _bases(obj) if name.startswith("pynumaflow.")}
        self._handler = obj.handler if "Sinker" in names else obj
        self._path = path
        if not callable(self._handler):
            raise TypeError(f"{path}: {type(obj).__name__} is not a pynumaflow sink handler")

    def write(self, ids: Any, payloads: Any, errors: Any = (), times: Any = None) -> None:
        from pynumaflow.sinker import Datum

        id_list = ids.to_pylist() if hasattr(ids, "to_pylist") else list(ids)
        values = payloads.to_pylist() if hasattr(payloads, "to_pylist") else list(payloads)
        if not id_list:
            return
        now = datetime.now(UTC).timestamp()
        stamps = (
            times.to_pylist() if times is not None and hasattr(times, "to_pylist") else [now] * len(values)
        )
        watermark = datetime.fromtimestamp(min(stamps, default=now), UTC)
        batch = [
            Datum(
                keys=[],
                sink_msg_id=i,
                value=v,
                event_time=datetime.fromtimestamp(t, UTC),
                watermark=watermark,
            )
            for i, v, t in zip(id_list, values, stamps, strict=True)
        ]
        call = self._handler(iter(batch))
        responses = _run(call) if inspect.isawaitable(call) else call
        failed = [r for r in responses if not r.success]
        answered = {r.id for r in responses}
        missing = [i for i in id_list if i not in answered]
        if failed or missing:
            first = failed[0] if failed else None
            reason = (
                f"{len(failed)} message(s) failed, the first {first.id!r}: "
                f"{first.err or 'sent to a fallback sink, which Tidal does not have'}"
                if first is not None
                else f"no response for {len(missing)} message(s), the first {missing[0]!r}"
            )
            raise RuntimeError(f"{self._path}: {reason}; the micro-batch will be retried")

    def commit(self, batch_id: int, parts: Any) -> None:
        return None


class _Output:
    """What pynumaflow's ``NonBlockingIterator`` is to a ``read_handler``: ``await put(message)``."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    async def put(self, item: Any) -> None:
        self.items.append(item)


def _call(result: Any) -> Any:
    return _run(result) if inspect.isawaitable(result) else result


class SourcerSource:
    """A pynumaflow ``Sourcer`` as a Tidal user source (:class:`tidal.contracts.Source`)."""

    def __init__(self, obj: Any, path: str, timeout_ms: int = 1000) -> None:
        self._sourcer = obj() if isinstance(obj, type) else obj
        for method in ("read_handler", "ack_handler", "pending_handler"):
            if not callable(getattr(self._sourcer, method, None)):
                raise TypeError(
                    f"{path}: {type(self._sourcer).__name__} has no {method} (not a pynumaflow Sourcer)"
                )
        self._timeout_ms = timeout_ms
        self._offsets: dict[str, Any] = {}  # Tidal's offset → the source's Offset, until acknowledged

    def read(self, n: int) -> list[tuple[str, bytes, Any]]:
        from pynumaflow.sourcer import ReadRequest

        out = _Output()
        _call(self._sourcer.read_handler(ReadRequest(num_records=n, timeout_in_ms=self._timeout_ms), out))
        read = []
        for message in out.items:
            offset = message.offset
            raw = bytes(offset.offset)
            try:
                text = raw.decode()
            except UnicodeDecodeError:
                text = raw.hex()
            key = f"{offset.partition_id}:{text}"
            self._offsets[key] = offset
            read.append((key, bytes(message.payload), message.event_time))
        return read

    def ack(self, offsets: Any) -> None:
        from pynumaflow.sourcer import AckRequest

        known = [self._offsets.pop(str(o)) for o in offsets if str(o) in self._offsets]
        if known:
            _call(self._sourcer.ack_handler(AckRequest(offsets=known)))

    def pending(self) -> float | None:
        response = _call(self._sourcer.pending_handler())
        count = getattr(response, "count", None)
        return None if count is None or count < 0 else float(count)
