"""The Python streaming data source every vertex query reads from and writes to: ``tidal_vertex``.

``spark.readStream.format("tidal_vertex").option("plan", plan.encode())`` reads what the vertex
consumes: its input buffer (a UDF or a sink), the user's source (through a staging buffer) or
the generator (:mod:`tidal.spark.sources`). ``writeStream.format("tidal_vertex")`` applies the
vertex's UDF and writes to its output buffers, its sink and its dead letter.

**The partition count is the replica count.** At every micro-batch the reader asks the control
record for the vertex's replicas and returns that many partitions (one Spark task each).
Admission control takes at most ``replicas × readBatchSize`` messages; replicas 0, or an output
buffer over its usage limit (back pressure), returns the start offset, which idles the query.

**Exactly once.** Offsets are buffer sequences, so Spark's checkpoint replays exactly the same
range after a crash. Output ids derive from input ids (``<vertex>:<input id>``): a replayed batch
rewrites ids the output buffer de-duplicates. The input is trimmed only in the writer's commit,
after every task of the micro-batch succeeded.

**The UDF runs inside the writer task**, on the Arrow batches the reader produced. A separate
``mapInArrow`` stage would add a third Python process per task and an Arrow round trip through
the JVM for the same work.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)

from tidal import errors
from tidal.spark.plan import VertexPlan

__all__ = ["SCHEMA", "VertexDataSource", "admit", "plan_partitions", "to_arrow"]

SCHEMA = "seq long, id string, payload binary"
_FULL_WAIT_SECONDS = 300.0
_APPEND_CHUNK = 1000  # messages per append: a batch is stored whole or refused whole


def to_arrow(rows: Sequence[tuple[int, str, bytes]]) -> Any:
    """Buffer rows ``(seq, id, payload)`` as one Arrow batch in :data:`SCHEMA`."""
    import pyarrow as pa

    seqs, ids, payloads = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.RecordBatch.from_arrays(
        [pa.array(seqs, pa.int64()), pa.array(ids, pa.string()), pa.array(payloads, pa.binary())],
        names=["seq", "id", "payload"],
    )


@dataclass
class Range(InputPartition):
    first: int
    last: int
    index: int


def split(first: int, last: int, replicas: int) -> list[Range]:
    """``first..last`` in at most ``replicas`` contiguous ranges (one task each)."""
    if last < first:
        return []
    n = max(1, min(replicas, last - first + 1))
    step = -(-(last - first + 1) // n)
    return [Range(a, min(last, a + step - 1), i) for i, a in enumerate(range(first, last + 1, step))]


def admit(plan: VertexPlan, start: int, available: int) -> int:
    """The end offset of a vertex's next micro-batch: at most replicas × readBatchSize past
    ``start``; ``start`` itself (idle) at replicas 0 or when an output buffer is over its usage
    limit (back pressure)."""
    replicas = plan.control().replicas(plan.vertex, default=1)
    if replicas <= 0 or plan.outputs_full() is not None:
        return start
    return min(available, start + replicas * plan.read_batch_size)


def plan_partitions(plan: VertexPlan, first: int, last: int) -> list[Range]:
    """Record ``first..last`` as the vertex's current micro-batch (its writer's commit trims and
    counts by it) and split it into one range per replica."""
    control = plan.control()
    control.set_plan(plan.vertex, first, last)
    return split(first, last, control.replicas(plan.vertex, default=1))


@dataclass
class _Written(WriterCommitMessage):
    written: int
    partition: int
    sink_part: Any = None
    dead_part: Any = None
    dead: int = 0


def _plan(options: dict[str, str], where: str) -> VertexPlan:
    text = options.get("plan")
    if text is None:
        raise errors.SpecError(
            f"{where}.option('plan')",
            "is required",
            "start vertex queries with tidal.spark.vertex.start_vertex",
        )
    return VertexPlan.decode(text)


class VertexDataSource(DataSource):
    """``format("tidal_vertex")``; its one option, ``plan``, is an encoded :class:`VertexPlan`."""

    @classmethod
    def name(cls) -> str:
        return "tidal_vertex"

    def schema(self) -> str:
        return SCHEMA

    def _options(self) -> dict[str, str]:
        # PySpark hands options over case-insensitively (lower-cased keys): normalise once here.
        return {str(k).lower(): str(v) for k, v in self.options.items()}

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802 - PySpark's name
        plan = _plan(self._options(), "readStream")
        if plan.source is not None and plan.source.generator is not None:
            from tidal.spark.sources import GeneratorReader

            return GeneratorReader(plan)
        if plan.source is not None:
            from tidal.spark.sources import UserSourceReader

            return UserSourceReader(plan)
        return BufferReader(plan)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        return VertexWriter(_plan(self._options(), "writeStream"))


class BufferReader(DataSourceStreamReader):
    """Reads the vertex's input buffer (``plan.input``) by sequence."""

    def __init__(self, plan: VertexPlan) -> None:
        if plan.input is None:
            raise errors.SpecError(
                f"vertices[{plan.vertex}]", "has no input buffer", "connect it with an edge"
            )
        self.plan = plan
        self.input: str = plan.input

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        return {"seq": self.plan.buffer(self.input).committed()}

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
        return {"seq": admit(self.plan, start["seq"], self.plan.buffer(self.input).last_seq())}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return plan_partitions(self.plan, start["seq"] + 1, end["seq"])

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, Range)
        rows = self.plan.buffer(self.input).read_range(partition.first, partition.last)
        if rows:
            yield to_arrow(rows)

    def commit(self, end: dict[str, int]) -> None:
        """Spark calls this only when it plans the *next* batch (so never for the last batch
        before an idle spell); the writer's commit trims the input as soon as a batch is done."""
        self.plan.buffer(self.input).commit(end["seq"])


class VertexWriter(DataSourceStreamArrowWriter):
    """Applies the UDF (if any) and writes to the output buffers, the sink and the dead letter."""

    def __init__(self, plan: VertexPlan) -> None:
        self.plan = plan
        self._transform: Any = None
        self._sinks: dict[str, Any] = {}

    # Built lazily: the writer object is pickled to the tasks, the function and the sinks are not.
    def transform(self) -> Any:
        if self._transform is None and self.plan.udf is not None:
            from tidal.spark.udf import Transform

            self._transform = Transform(
                self.plan.vertex, self.plan.udf, dead_letter=self.plan.udf.dead_letter is not None
            )
        return self._transform

    def sink(self, role: str) -> Any:
        if role not in self._sinks:
            from tidal.spark.sinks import build_sink

            at = f"vertices[{self.plan.vertex}]"
            if role == "sink":
                spec, at = self.plan.sink, f"{at}.sink"
            else:
                spec, at = (self.plan.udf.dead_letter if self.plan.udf else None), f"{at}.udf.deadLetter"
            self._sinks[role] = (
                None if spec is None else build_sink(spec, self.plan.vertex, self.plan.run_dir, at, role)
            )
        return self._sinks[role]

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        from pyspark import TaskContext

        ids: list[str] = []
        payloads: list[bytes] = []
        dead: list[tuple[str, bytes, str]] = []
        transform = self.transform()
        for batch in iterator:
            batch_ids = batch.column("id").to_pylist()
            batch_payloads = batch.column("payload").to_pylist()
            if transform is None:
                ids.extend(batch_ids)
                payloads.extend(batch_payloads)
            else:
                outcome = transform.apply(batch_ids, batch_payloads)
                ids.extend(outcome.ids)
                payloads.extend(outcome.payloads)
                dead.extend(outcome.dead)
        if self.plan.outputs:
            prefix = f"{self.plan.vertex}:"
            self._append([prefix + i for i in ids], payloads)
        sink = self.sink("sink")
        sink_part = sink.write(ids, payloads) if sink is not None else None
        dead_part = None
        if dead:
            dead_part = self.sink("dead-letter").write(
                [d[0] for d in dead], [d[1] for d in dead], [d[2] for d in dead]
            )
        context = TaskContext.get()
        return _Written(len(ids), context.partitionId() if context else -1, sink_part, dead_part, len(dead))

    def _append(self, ids: list[str], payloads: list[bytes]) -> None:
        for name in self.plan.outputs:  # fan-out: every output buffer gets every message
            out = self.plan.buffer(name)
            for at in range(0, len(ids), _APPEND_CHUNK):
                chunk_ids, chunk = ids[at : at + _APPEND_CHUNK], payloads[at : at + _APPEND_CHUNK]
                deadline = time.monotonic() + _FULL_WAIT_SECONDS
                while True:
                    try:
                        out.append(chunk, chunk_ids)
                        break
                    except errors.BufferFull:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.05)  # back pressure: wait for the reader downstream to commit

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        written = [m for m in messages if isinstance(m, _Written)]
        sink = self.sink("sink")
        if sink is not None:
            sink.commit(batchId, [m.sink_part for m in written])
        if any(m.dead for m in written):
            self.sink("dead-letter").commit(batchId, [m.dead_part for m in written])
        control = self.plan.control()
        plan = control.plan(self.plan.vertex)
        # Every task of the batch succeeded and its output is stored: trim the input now.
        # (A replay after a crash rewrites ids the output buffer already holds.)
        if plan is not None and plan.count and self.plan.input is not None:
            self.plan.buffer(self.plan.input).commit(plan.last)
        control.record_batch(
            self.plan.vertex,
            batchId,
            len(messages),
            plan.count if plan is not None else 0,
            sum(m.written for m in written),
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to undo: a retried batch rewrites the same ids, which the buffer de-duplicates."""
