"""pynumaflow's ``ReduceStreamer`` on a reduce vertex (``streaming: true`` on a fixed or sliding window).

A ``ReduceStreamer`` (a class, or a function ``handler(keys, datums, output, md)``) puts its
messages on ``output`` (pynumaflow's ``NonBlockingIterator``) instead of returning them, so it can
send partial results while the window is still open: on Numaflow each ``put`` goes downstream
at once, and the window's end only closes the stream.

**On Spark's append mode the window's messages reach the handler when the window closes**: Spark
keeps an open window's messages in its state store and hands the window over once, when the
watermark passes its end (:mod:`tidal.spark.query.reduce`). So the handler runs then, over all
of the window's messages, and its outputs are whatever it put on ``output``, in order, written
to the next vertex together. What Numaflow would have sent early (the examples' "counter > 10"
partial results) is sent too, with the rest, at the window's close: the next vertex gets the same
messages, but a partial result's latency is the window's length plus the watermark's delay (the
same as the final one's), not the moment it was produced. A pipeline that needs early results
while a long window is open should use a shorter window (or a sliding one) on Tidal.

The handler is called as pynumaflow's server calls it: a class is built per key and window with
``reduceArgs`` (``ReduceStreamAsyncServer(cls, init_args=...)``), ``datums`` is an async iterator
of ``Datum``, ``md.interval_window`` holds the window's bounds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

__all__ = ["streamed"]


async def streamed(fn: Any, keys: list[str], datums: list[Any], start: datetime, end: datetime) -> list[Any]:
    """What ``fn`` (the built ``ReduceStreamer``, or the function) put on its output for one key's
    window, in order, once it has returned."""
    from pynumaflow._constants import STREAM_EOF
    from pynumaflow.reducestreamer import Datum, IntervalWindow, Metadata
    from pynumaflow.shared.asynciter import NonBlockingIterator

    async def stream() -> AsyncIterator[Any]:
        for d in datums:
            yield Datum(
                keys=list(d.keys), value=d.value, event_time=d.event_time, watermark=d.watermark, headers={}
            )

    output: NonBlockingIterator[Any] = NonBlockingIterator()
    md = Metadata(interval_window=IntervalWindow(start=start, end=end))
    await fn(list(keys), stream(), output, md)
    await output.put(STREAM_EOF)
    return [message async for message in output.read_iterator()]
