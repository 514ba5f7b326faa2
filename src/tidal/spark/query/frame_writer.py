"""The writer of a SQL or DataFrame step: the rows Spark made, into the output buffers.

Each writer task gets what its partition of the step's query produced (:mod:`tidal.spark.query.frames`):
transformed records (``error`` null) and records that did not parse (``error``: the reason).
The records are appended to every output buffer under the key ``<vertex>:b<batch>/t<task>``
(per-batch de-duplication, :mod:`tidal.isb.base`). A replayed micro-batch reads the same
recorded input ranges, so each task gets the same rows, and its keys are skipped: exactly once.
The rows are sorted by id before they are cut into appends, so the cut does not depend on the
order Spark happened to produce them in (a shuffle join reorders rows).

A step may turn one input into several rows (a join that matches twice): their ids are
``<vertex>:<input id>.<k>``, numbered in id-and-content order; one row keeps ``<vertex>:<input id>``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from tidal import errors
from tidal.spark.batch.heap import freeze_imports
from tidal.spark.batch.pieces import piece_size
from tidal.spark.query.writer import VertexWriter, Written

__all__ = ["FrameWriter", "number_repeats"]


def number_repeats(ids: list[str]) -> list[str]:
    """``ids`` (sorted) with repeated ones numbered ``<id>.<k>`` so every output id is unique."""
    out: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[i]:
            j += 1
        out.extend([ids[i]] if j == i else [f"{ids[i]}.{k}" for k in range(j - i + 1)])
        i = j + 1
    return out


class FrameWriter(VertexWriter):
    """Writes a SQL or DataFrame step's rows: records to the outputs, bad ones to the dead letter."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        started = time.perf_counter()
        batches = list(iterator)
        freeze_imports()
        context = TaskContext.get()
        partition = context.partitionId() if context else -1
        if not batches:
            return Written(0, partition, busy=time.perf_counter() - started)
        table = pa.Table.from_batches(batches)
        ok = pc.is_null(table.column("error"))
        good = table.filter(ok).sort_by([("id", "ascending"), ("payload", "ascending")])
        bad = table.filter(pc.invert(ok))
        if good.num_rows and self.config.outputs:
            batch_id = context.getLocalProperty("streaming.sql.batchId") if context else None
            if batch_id is None:
                raise RuntimeError("a step's writer ran outside a streaming micro-batch")
            ids = pa.array(number_repeats(good.column("id").to_pylist()), pa.string())
            payloads = good.column("payload").combine_chunks()
            self._append(
                f"{self.config.vertex}:b{batch_id}/t{partition}", ids, payloads, piece_size(self.config)
            )
        dead_part = None
        if bad.num_rows:
            dead_ids, reasons = bad.column("id").to_pylist(), bad.column("error").to_pylist()
            if self.config.udf is None or self.config.udf.dead_letter is None:
                raise errors.UdfError(
                    self.config.vertex,
                    dead_ids[0],
                    ValueError(f"{reasons[0]}; give the step a deadLetter to keep going past bad records"),
                    1,
                )
            dead_part = self.sink("dead-letter").write(
                bad.column("id").combine_chunks(), bad.column("payload").combine_chunks(), reasons
            )
        busy = time.perf_counter() - started
        return Written(good.num_rows, partition, None, dead_part, bad.num_rows, busy)

    def tasks(self, messages: list[WriterCommitMessage | None], parts: int | None) -> int:
        """The replicas that ran: the batch's read partitions (its writer tasks are twice as many,
        one for the records and one for the records that did not parse, or Spark's shuffle count)."""
        return parts if parts is not None else len(messages)
