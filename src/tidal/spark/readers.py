"""The readers of vertex queries: what a micro-batch covers, on the driver side of Spark.

Every reader hands Spark one row per partition (a task's input range,
:func:`~tidal.spark.admission.task_row`);
the writer task reads the messages themselves (:mod:`tidal.spark.writer`). The readers differ in
where the offsets come from:

* :class:`BufferReader` — a UDF or sink: its input buffer's sequences.
* :class:`GeneratorReader` — the ``generator`` source: message numbers due by the load shape.
* :class:`UserSourceReader` — the user's source (Numaflow's UDSource contract), made replayable
  through its staging buffer. A source class whose constructor takes ``state_dir`` gets a
directory of its own in the run directory (``state/<vertex>``) to keep its position in, so two
runs never share one and a dry run cannot consume what the real run reads.

Source readers report what they see of their source to the control record at every trigger, so
the controller in the driver process can scale the source on its pending (the readers run in a
Python process the JVM starts, not in the driver's).

**User source.** The user's class implements :class:`tidal.contracts.Source`: ``read(n)`` → an
iterable of ``(offset, payload)``, ``ack(offsets)`` and ``pending()`` (a negative number means
"not available"). The reader calls ``read`` for as many messages as the replicas admit, stores
them in the vertex's staging buffer under ids made of their offsets, and only then ``ack``s them.
A crash between storing and ``ack`` makes the source deliver the same offsets again, which the
staging buffer de-duplicates; so offsets must identify messages. ``pending()`` or ``read()``
raising is logged and reported as "not available": the pipeline keeps running and the
controller leaves the source alone.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from tidal import contracts, errors
from tidal.isb.base import Buffer
from tidal.log import Repeated
from tidal.spark import stores
from tidal.spark.admission import Range, admit, partition_batch, task_row
from tidal.spark.checkpoint_sync import sync_planned_batch
from tidal.spark.config import QueryConfig
from tidal.spark.generator import generator_start

__all__ = ["BufferReader", "GeneratorReader", "RangeReader", "UserSourceReader"]

log = logging.getLogger("tidal.source")
repeated = Repeated(log)


WAKE = "wake"


def _takes(cls: type, parameter: str) -> bool:
    try:
        return parameter in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


class RangeReader(DataSourceStreamReader):
    """What every reader shares: offsets ``{KEY: n}``, the replica count read once per batch in
    :meth:`admit` and used again by :meth:`partitions`, and one task row per partition."""

    KEY = "seq"

    def __init__(self, config: QueryConfig) -> None:
        self.config = config
        self._admitted: dict[tuple[int, int], int] = {}  # (start, end) → replicas that admitted it

    def admit(self, start: int, available: int) -> int:
        admission = admit(self.config, start, available)
        if admission.end > start:
            self._admitted = {(start, admission.end): admission.replicas}
        return admission.end

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        sync_planned_batch(self.config)  # buffers.durability: sync, before any task appends
        first, last = start[self.KEY], end[self.KEY]
        replicas = self._admitted.pop((first, last), None)
        return partition_batch(self.config, first + 1, last, replicas)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, Range)
        yield task_row(partition)


class BufferReader(RangeReader):
    """Reads the vertex's input buffer (``config.input``) by sequence."""

    def __init__(self, config: QueryConfig) -> None:
        super().__init__(config)
        if config.input is None:
            raise errors.SpecError(
                f"vertices[{config.vertex}]", "has no input buffer", "connect it with an edge"
            )
        self.input: str = config.input
        self._trimmed = -1  # the sequence this reader last trimmed its input to
        self._woken = False  # a reduce's first offset asked for (see _wake)

    def buffer(self) -> Buffer:
        return stores.buffer(self.config, self.input)

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 - PySpark's name
        return {self.KEY: self.buffer().committed()}

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
        buffer = self.buffer()
        end = {self.KEY: self.admit(start[self.KEY], buffer.last_seq())}
        if not self.config.reduce:
            return end
        self._trim_behind(buffer, start[self.KEY])
        return {**end, WAKE: self._wake(start)}

    def _wake(self, start: dict[str, int]) -> int:
        """A reduce's offsets count the query's starts (``wake``): the first offset a new query
        asks for is one more than its start, so Spark runs a batch even with no new input.

        Spark closes windows in a batch *after* the one that moved the watermark (a "no-data
        batch"), and only when the batch before ran in the same query: a query restarted after
        the commit log of the batch that read the stream's last message has the watermark (from
        the commit log) but runs no batch until a message comes, so its last windows would wait
        for one. The test that SIGKILLs a reduce mid-run hung this way in CI when the kill fell
        between the two batches. Once per start; with no input waiting, the batch is empty."""
        if self._woken:
            return start.get(WAKE, 0)
        self._woken = True
        return start.get(WAKE, 0) + 1

    def _trim_behind(self, buffer: Buffer, start: int) -> None:
        """A reduce vertex's input is trimmed here, not at the writer's commit: its open windows
        live in Spark's state store, and a batch replayed after a crash between the writer's commit
        and Spark's commit log rebuilds them from the state before the batch *and the batch's
        input*. Spark asks for offsets one batch at a time, after the commit log of the batch that
        ended at ``start``: from here on that input is needed by no replay. Every trigger asks,
        so an idle reduce's input is empty one trigger after its last batch."""
        if start > self._trimmed:
            buffer.commit(start)
            self._trimmed = start

    def commit(self, end: dict[str, int]) -> None:
        """Spark calls this only when it plans the *next* batch (so never for the last batch
        before an idle spell); the writer's commit trims the input as soon as a batch is done
        (a reduce's: :meth:`_trim_behind`)."""
        self.buffer().commit(end[self.KEY])
        self._trimmed = max(self._trimmed, end[self.KEY])


class RowsReader(BufferReader):
    """A SQL or DataFrame step's reader: the messages of each range themselves, as Arrow
    (``id, payload``), for Spark to parse and transform; the ranges are split by replicas as
    for every vertex, so a replica is still a task."""

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, Range)
        from tidal.spark.writer import piece_size

        buffer = self.buffer()
        step = piece_size(self.config)  # read in the pieces other vertices' writers read in
        for a in range(partition.first, partition.last + 1, step):
            batch = buffer.read_batch(a, min(partition.last, a + step - 1))
            yield batch.select(["id", "payload", "t", "keys"] if self.config.reduce else ["id", "payload"])


class GeneratorReader(RangeReader):
    """The generator: pending is what the load shape made due and is not yet admitted."""

    KEY = "n"

    def __init__(self, config: QueryConfig) -> None:
        super().__init__(config)
        assert config.source is not None and config.source.generator is not None
        g = config.source.generator
        self.spec = g
        self.shape = g.load_shape()
        self.started: float | None = None

    def start(self) -> float:
        """When the load shape's clock started: at the first trigger (then kept over restarts),
        not when the pipeline was built: Spark's warm-up is no catch-up burst."""
        if self.started is None:
            self.started = generator_start(self.config)
        return self.started

    def due(self, now: float) -> int:
        due = self.shape.total(now - self.start())
        return due if self.spec.max_messages is None else min(due, self.spec.max_messages)

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        return {self.KEY: 0}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        """The ranges, each with the clock's start: the tasks make the source times from it."""
        t0 = self.start()
        return [replace(r, t0=t0) for r in super().partitions(start, end) if isinstance(r, Range)]

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
        due = self.due(time.time())
        n = start[self.KEY]
        stores.control(self.config).report_source(self.config.vertex, float(max(0, due - n)))
        return {self.KEY: self.admit(n, due)}

    def commit(self, end: dict[str, int]) -> None:
        return None  # nothing to trim: the numbers are the messages


class UserSourceReader(BufferReader):
    """The user's source, made replayable through its staging buffer (``config.input``)."""

    def __init__(self, config: QueryConfig) -> None:
        super().__init__(config)
        assert config.source is not None and config.source.staged
        # Here, not at the top: a task's read worker imports this module to run ``read`` and
        # should not pay for the spec package (pydantic) it never uses.
        from tidal.spec.validate import resolve

        if config.source.pynumaflow is not None:
            from tidal.spark.pynumaflow import SourcerSource

            at = f"vertices[{config.vertex}].source.pynumaflow"
            sourcer = SourcerSource(resolve(config.source.pynumaflow, at, "class"), at)
            self.source: contracts.Source = contracts.check_source(sourcer, at)
            return
        user = config.source.user
        assert user is not None
        at = f"vertices[{config.vertex}].source.user.class"
        cls = resolve(user.class_, at, "class")
        options = dict(user.options)
        if "state_dir" not in options and _takes(cls, "state_dir"):
            state = Path(config.run_dir) / "state" / config.vertex
            state.mkdir(parents=True, exist_ok=True)
            options["state_dir"] = str(state)
        self.source = contracts.check_source(cls(**options), at)

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
        final = min(end, last)
        if final != end:  # fewer staged than admitted: the batch is the staged part
            replicas = self._admitted.pop((n, end), None)
            if replicas is not None and final > n:
                self._admitted = {(n, final): replicas}
        return {self.KEY: final}

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
        payloads = [p if isinstance(p, bytes) else str(p).encode() for p in (m[1] for m in messages)]
        # A third element is the message's event time (seconds, or a datetime): its source time.
        times = [event_seconds(m[2]) if len(m) > 2 else None for m in messages]
        stamps = None if all(t is None for t in times) else [time.time() if t is None else t for t in times]
        staged.append(payloads, [str(o) for o in offsets], stamps)  # stored before it is acknowledged
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


def event_seconds(value: Any) -> float:
    """A source's event time (seconds since the epoch, or a ``datetime``; naive means UTC)."""
    if isinstance(value, int | float):
        return float(value)
    from datetime import UTC, datetime

    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    raise TypeError(f"an event time is seconds or a datetime, got {type(value).__name__}")
