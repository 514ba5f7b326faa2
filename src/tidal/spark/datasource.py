"""A Python streaming data source over an input buffer, and a streaming sink into a buffer.

``spark.readStream.format("tidal_buffer")`` reads a vertex's input buffer. At every micro-batch
the reader asks the control record for the vertex's replicas and returns that many partitions:
**the partition count is the replica count** (one Spark task each). Admission control takes at
most ``replicas × readBatchSize`` messages; replicas 0 returns the start offset, which idles the
query. Offsets are buffer sequences, so Spark's checkpoint replays exactly the same range after
a crash, and the buffer is committed (trimmed) only after Spark committed the micro-batch.

``writeStream.format("tidal_buffer")`` appends each task's rows to the output buffer with ids
derived from the input ids (``<vertex>:<input id>``): a replayed batch rewrites the same ids,
which the buffer de-duplicates. When the output buffer is full the task waits (back pressure).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)

from tidal import errors

__all__ = ["SCHEMA", "BufferDataSource"]

SCHEMA = "seq long, id string, payload binary"
_FULL_WAIT_SECONDS = 120.0


@dataclass
class _Range(InputPartition):
    first: int
    last: int
    index: int


@dataclass
class _Written(WriterCommitMessage):
    rows: int
    partition: int
    max_input_seq: int


def _open(options: dict[str, str], buffer_option: str) -> Any:
    from tidal.isb.sqlite import SqliteStore

    return SqliteStore(options["db"]).open(options[buffer_option])


def _require(options: dict[str, str], keys: tuple[str, ...], where: str) -> None:
    for key in keys:
        if key not in options:
            raise errors.SpecError(f"{where}.option({key!r})", "is required", "pass the pipeline's value")


def _control(options: dict[str, str]) -> Any:
    from tidal.isb.control import ControlStore

    return ControlStore(options["db"])


class BufferDataSource(DataSource):
    """Options: ``db`` (pipeline database), ``vertex``; reader ``buffer``, ``readBatchSize``;
    writer ``out``."""

    @classmethod
    def name(cls) -> str:
        return "tidal_buffer"

    def schema(self) -> str:
        return SCHEMA

    def _options(self) -> dict[str, str]:
        # PySpark hands options over case-insensitively (lower-cased keys): normalise once here.
        return {str(k).lower(): str(v) for k, v in self.options.items()}

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802 - PySpark's name
        return _BufferReader(self._options())

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        return _BufferWriter(self._options())


class _BufferReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        _require(options, ("db", "buffer", "vertex"), "readStream")
        self.options = options
        self.vertex = options["vertex"]
        self.read_batch_size = int(options.get("readbatchsize", "500"))

    def _replicas(self) -> int:
        return _control(self.options).replicas(self.vertex, default=1)

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        return {"seq": _open(self.options, "buffer").committed()}

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
        replicas = self._replicas()
        if replicas <= 0:
            return start  # replicas 0: the query idles
        last = _open(self.options, "buffer").last_seq()
        return {"seq": min(last, start["seq"] + replicas * self.read_batch_size)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        first, last = start["seq"] + 1, end["seq"]
        if last < first:
            return []
        n = max(1, min(self._replicas(), last - first + 1))
        step = -(-(last - first + 1) // n)
        return [_Range(a, min(last, a + step - 1), i) for i, a in enumerate(range(first, last + 1, step))]

    def read(self, partition: InputPartition) -> Iterator[tuple[int, str, bytes]]:
        assert isinstance(partition, _Range)
        yield from _open(self.options, "buffer").read_range(partition.first, partition.last)

    def commit(self, end: dict[str, int]) -> None:
        """Spark calls this only when it plans the *next* batch (so never for the last batch
        before an idle spell); the sink's commit trims the input as soon as a batch is done."""
        _open(self.options, "buffer").commit(end["seq"])


class _BufferWriter(DataSourceStreamWriter):
    def __init__(self, options: dict[str, str]) -> None:
        _require(options, ("db", "out", "vertex"), "writeStream")
        self.options = options
        self.vertex = options["vertex"]

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        from pyspark import TaskContext

        payloads: list[bytes] = []
        ids: list[str] = []
        max_seq = 0
        for row in iterator:
            payloads.append(bytes(row["payload"]))
            ids.append(f"{self.vertex}:{row['id']}")
            max_seq = max(max_seq, int(row["seq"]))
        out = _open(self.options, "out")
        deadline = time.monotonic() + _FULL_WAIT_SECONDS
        while payloads:
            try:
                out.append(payloads, ids)
                break
            except errors.BufferFull:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # back pressure: wait for the reader downstream to commit
        context = TaskContext.get()
        return _Written(len(payloads), context.partitionId() if context else -1, max_seq)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        written = [m for m in messages if isinstance(m, _Written)]
        _control(self.options).record_batch(self.vertex, batchId, len(messages), sum(m.rows for m in written))
        # Every task of the batch succeeded and its output is stored: trim the input now.
        # (A replay after a crash rewrites ids the output buffer already holds.)
        done = max((m.max_input_seq for m in written), default=0)
        if done and "in" in self.options:
            _open(self.options, "in").commit(done)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to undo: a retried batch rewrites the same ids, which the buffer de-duplicates."""
