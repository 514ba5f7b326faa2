"""The readers every vertex query builds on: what a micro-batch covers, on the driver side of Spark.

Every reader hands Spark one row per partition (a task's input range,
:func:`~tidal.spark.batch.admission.task_row`); the writer task reads the messages themselves
(:mod:`tidal.spark.query.writer`). Here:

* :class:`RangeReader` — what every reader shares: offsets, the replica count admitted once per
  batch, one task row per partition. The sources' readers build on it
  (:mod:`tidal.spark.sources`).
* :class:`BufferReader` — a UDF, a sink, or a staged source: its input buffer's sequences.
* :class:`RowsReader` — a SQL or DataFrame step: the messages themselves, as Arrow.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from tidal import errors
from tidal.isb.base import Buffer
from tidal.spark.batch import side_inputs, stores
from tidal.spark.batch.admission import Range, admit, partition_batch, task_row
from tidal.spark.batch.checkpoint_sync import sync_planned_batch
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.idle_tracker import IdleTracker
from tidal.spark.batch.pieces import piece_size

__all__ = ["BufferReader", "RangeReader", "RowsReader"]

WAKE = "wake"


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
        # with the side inputs' values as they are now (tidal.spark.batch.side_inputs)
        return side_inputs.carry(self.config, partition_batch(self.config, first + 1, last, replicas))

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
        self._idle: IdleTracker | None = None  # a reduce's idle watermarks (watermark.idleSource)

    def buffer(self) -> Buffer:
        return stores.buffer(self.config, self.input)

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 - PySpark's name
        return {self.KEY: self.buffer().committed()}

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
        buffer = self.buffer()
        if self.config.reduce and self.config.idle is not None:
            now = time.time()
            if self._idle is None:
                self._idle = IdleTracker(self.config, self.config.idle, now)
            self._idle.tick(buffer, now)  # its control rows go into this batch
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
        buffer = self.buffer()
        step = piece_size(self.config)  # read in the pieces other vertices' writers read in
        for a in range(partition.first, partition.last + 1, step):
            batch = buffer.read_batch(a, min(partition.last, a + step - 1))
            yield batch.select(["id", "payload", "t", "keys"] if self.config.reduce else ["id", "payload"])
