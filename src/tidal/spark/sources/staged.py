"""The staged sources' reader: a source read on the driver into the vertex's staging buffer.

A staged source (a user's class, a pynumaflow ``Sourcer``, a JetStream stream) implements
:class:`tidal.contracts.Source`: ``read(n)`` → an iterable of ``(offset, payload[, event
time])``, ``ack(offsets)`` and ``pending()`` (a negative number or None means "not available").
The reader calls ``read`` for as many messages as the replicas admit, stores them in the vertex's
staging buffer under ids made of their offsets (synced under ``buffers.durability: sync``), and
only then ``ack``s them. A crash between storing and ``ack`` makes the source deliver the same
offsets again, which the staging buffer de-duplicates; so offsets must identify messages. When
the messages read cannot be stored (the append raises: a full disk, a full buffer, a stop), a
source with ``nack(offsets)`` (optional; a pynumaflow ``Sourcer``'s ``nack_handler``) gets them
back before the error goes on, so it can give them again.
``pending()`` or ``read()`` raising is logged and reported as "not available": the pipeline keeps
running and the controller leaves the source alone.

Source readers report what they see of their source to the control record at every trigger, so
the controller in the driver process can scale the source on its pending (the readers run in a
Python process the JVM starts, not in the driver's). The tasks read the staging buffer as any
vertex reads its input (:class:`~tidal.spark.batch.readers.BufferReader`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from tidal import contracts
from tidal.isb.base import Buffer
from tidal.log import Repeated
from tidal.spark.batch import stores
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.readers import BufferReader

__all__ = ["StagedSourceReader", "event_seconds"]

log = logging.getLogger("tidal.source")
repeated = Repeated(log)


class StagedSourceReader(BufferReader):
    """A :class:`tidal.contracts.Source`, made replayable through its staging buffer (``config.input``)."""

    def __init__(self, config: QueryConfig, source: contracts.Source) -> None:
        super().__init__(config)
        assert config.source is not None and config.source.staged
        self.source = source
        self._drops_recorded = 0  # of the source's own `dropped` count (a NATS client's)

    def pending(self) -> tuple[float | None, str]:
        value, why = contracts.ask_pending(self.source.pending)
        if value is None and why.startswith("pending() raised"):
            kind = why.split(":", 1)[0]
            repeated.warning(
                (self.config.vertex, kind), "source %s: %s; treated as not available", self.config.vertex, why
            )
        return value, why

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
        control, vertex = stores.control(self.config), self.config.vertex
        staged = self.buffer()
        stats = staged.stats()
        n = start[self.KEY]
        # How far the replicas admit, as if the source held plenty (it cannot say how much it has).
        end = self.admit(n, n + stats.limits.max_length)
        room = min(end - stats.last_seq, stats.limits.max_length - stats.length)
        error = self._pull(staged, room) if room > 0 else ""
        last = staged.last_seq()
        pending, why = self.pending()
        # What the source still holds plus what is staged and not yet processed.
        total = None if pending is None else pending + (last - n)
        control.report_source(vertex, total, error or why)
        self._record_drops(control)
        final = min(end, last)
        if final != end:  # fewer staged than admitted: the batch is the staged part
            replicas = self._admitted.pop((n, end), None)
            if replicas is not None and final > n:
                self._admitted = {(n, final): replicas}
        return {self.KEY: final}

    def _record_drops(self, control: Any) -> None:
        """A source that drops messages before Tidal reads them (``dropped``: a core NATS
        client past its limit) has them counted in the run's drops, as ``source-overflow``; a
        new source object (a restart) counts from 0 again, and what it adds is added."""
        dropped = int(getattr(self.source, "dropped", 0) or 0)
        if dropped < self._drops_recorded:
            self._drops_recorded = 0
        if dropped > self._drops_recorded:
            control.record_source_drops(self.config.vertex, dropped - self._drops_recorded)
            self._drops_recorded = dropped

    def _pull(self, staged: Buffer, n: int) -> str:
        try:
            messages = list(self.source.read(n))
        except Exception as exc:
            text = f"read({n}) raised {type(exc).__name__}: {exc}"
            repeated.warning(
                (self.config.vertex, "read", type(exc).__name__),
                "source %s: %s; will try again at the next trigger",
                self.config.vertex,
                text,
            )
            return text
        if not messages:
            return ""
        offsets = [m[0] for m in messages]
        try:
            payloads = [p if isinstance(p, bytes) else str(p).encode() for p in (m[1] for m in messages)]
            # A third element is the message's event time (seconds, or a datetime): its source time.
            times = [event_seconds(m[2]) if len(m) > 2 else None for m in messages]
            stamps = (
                None if all(t is None for t in times) else [time.time() if t is None else t for t in times]
            )
            staged.append(payloads, [str(o) for o in offsets], stamps)  # stored before it is acknowledged
        except BaseException:  # read and not stored (a bad event time, a full disk, a stop)
            self._nack(offsets)
            raise
        try:
            self.source.ack(offsets)
        except Exception as exc:  # the messages are safe in the staging buffer; a redelivery dedups
            repeated.warning(
                (self.config.vertex, "ack", type(exc).__name__),
                "source %s: ack raised %s: %s",
                self.config.vertex,
                type(exc).__name__,
                exc,
            )
        return ""

    def _nack(self, offsets: list[Any]) -> None:
        """Give ``offsets`` back to a source that takes them (``nack(offsets)``, a pynumaflow
        ``Sourcer``'s ``nack_handler``), as Numaflow does with messages it read and could not
        write: the source may then read them again at once, not after its own redelivery
        timeout. A source without ``nack`` redelivers what was never acknowledged in its own time."""
        nack = getattr(self.source, "nack", None)
        if not callable(nack):
            return
        try:
            nack(offsets)
        except Exception as exc:  # the store's failure is what the run reports; this one is logged
            log.warning("source %s: nack raised %s: %s", self.config.vertex, type(exc).__name__, exc)


def event_seconds(value: Any) -> float:
    """A source's event time (seconds since the epoch, or a ``datetime``; naive means UTC)."""
    if isinstance(value, int | float):
        return float(value)
    from datetime import UTC, datetime

    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    raise TypeError(f"an event time is seconds or a datetime, got {type(value).__name__}")
