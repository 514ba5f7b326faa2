"""The Python streaming data source every vertex query reads from and writes to: ``tidal_vertex``.

``spark.readStream.format("tidal_vertex").option("plan", plan.encode())`` plans what the vertex
consumes: its input buffer (a UDF or a sink), the user's source (through a staging buffer) or
the generator (:mod:`tidal.spark.sources`). ``writeStream.format("tidal_vertex")`` reads each
task's messages, applies the vertex's UDF and writes to its output buffers, its sink and its
dead letter.

**Spark carries the tasks; the buffers carry the messages.** A partition is a range of input
sequences, and the reader hands Spark one row per partition (:data:`SCHEMA`: ``first, last,
part``). The writer task reads that range straight from the buffer as Arrow. Passing the
messages themselves through Spark would send every payload from the reader's Python process
into the JVM and back out to the writer's, which the probe measured at about 1 µs per message
per hop on 2 cores: more than everything else a hop does (``docs/benchmarks.md``). A
consequence: Spark's own ``numInputRows`` counts tasks, not messages; Tidal's batch records
(``tidal status``, the controller) count messages.

**The partition count is the replica count.** At every micro-batch the reader asks the control
record for the vertex's replicas and returns that many partitions (one Spark task each).
Admission control takes at most ``replicas × readBatchSize`` messages, and no more than the
output buffers have room for (:meth:`VertexPlan.output_room`); replicas 0, or an output buffer
over its usage limit (back pressure), returns the start offset, which idles the query.

**Exactly once.** Offsets are buffer sequences, so Spark's checkpoint replays exactly the same
range after a crash. The split of a micro-batch into partitions is recorded with its plan, and
a replay reuses it even when the replica count changed in between, so every task of a replay
covers the same input ranges as before. A task writes its output in pieces, each made of a
fixed run of input sequences and appended under the key ``<vertex>:<first>-<last>``
(per-batch de-duplication, :mod:`tidal.isb.base`): a replayed task rewrites keys the output
buffer already holds, whatever the UDF returns the second time. The input is trimmed only in
the writer's commit, after every task of the micro-batch succeeded.

**The UDF runs inside the writer task**, on Arrow batches. A separate ``mapInArrow`` stage would
add a third Python process per task and an Arrow round trip through the JVM for the same work.
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
from tidal.spark.heap import freeze_imports
from tidal.spark.plan import VertexPlan

__all__ = ["SCHEMA", "VertexDataSource", "admit", "plan_partitions", "split", "task_row"]

SCHEMA = "first long, last long, part int"
_FULL_WAIT_SECONDS = 300.0
_MAX_PIECE = 8192  # input messages per output append (fewer when the buffers are small)


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
    ``start``, and no more than its output buffers have room for (:meth:`VertexPlan.output_room`);
    ``start`` itself (idle) at replicas 0 or when an output buffer is over its usage limit (back
    pressure)."""
    replicas = plan.control().replicas(plan.vertex, default=1)
    if replicas <= 0:
        return start
    take = replicas * plan.read_batch_size
    room = plan.output_room()
    if room is not None:
        take = min(take, room)
    return min(available, start + take)


def plan_partitions(plan: VertexPlan, first: int, last: int) -> list[Range]:
    """The partitions of the micro-batch ``first..last``, recorded as the vertex's current batch
    (its writer's commit trims and counts by it): one range per replica, or, when this batch was
    planned before (a replay after a crash), the same ranges as then."""
    control = plan.control()
    recorded = control.plan(plan.vertex)
    if recorded is not None and (recorded.first, recorded.last) == (first, last) and recorded.parts:
        return [Range(a, b, i) for i, (a, b) in enumerate(recorded.parts)]
    ranges = split(first, last, control.replicas(plan.vertex, default=1))
    control.set_plan(plan.vertex, first, last, [(r.first, r.last) for r in ranges])
    return ranges


def task_row(partition: Range) -> Any:
    """The one row a partition hands Spark: the input range its writer task reads."""
    import pyarrow as pa

    freeze_imports()  # every reader's task comes here, in a worker PySpark keeps for the next
    return pa.RecordBatch.from_arrays(
        [
            pa.array([partition.first], pa.int64()),
            pa.array([partition.last], pa.int64()),
            pa.array([partition.index], pa.int32()),
        ],
        names=["first", "last", "part"],
    )


def piece_size(plan: VertexPlan) -> int:
    """Input messages per output append: small enough that a piece fits an output buffer's
    usable room a few times over (an append is refused whole past ``bufferMaxLength``)."""
    return max(1, min(_MAX_PIECE, int(plan.limits.buffer_max_length * plan.limits.buffer_usage_limit) // 4))


def pieces(tasks: Iterator[Any], step: int) -> Iterator[tuple[int, int]]:
    """The task rows' input ranges cut into pieces of at most ``step`` sequences, each starting
    a whole number of steps into its range (so a replay of the same range cuts the same pieces)."""
    for rows in tasks:
        for first, last in zip(
            rows.column("first").to_pylist(), rows.column("last").to_pylist(), strict=True
        ):
            for a in range(first, last + 1, step):
                yield a, min(last, a + step - 1)


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
        writer = VertexWriter(_plan(self._options(), "writeStream"))
        freeze_imports()  # PySpark creates the writer anew in a worker of its own every micro-batch
        return writer


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
        yield task_row(partition)

    def commit(self, end: dict[str, int]) -> None:
        """Spark calls this only when it plans the *next* batch (so never for the last batch
        before an idle spell); the writer's commit trims the input as soon as a batch is done."""
        self.plan.buffer(self.input).commit(end["seq"])


class VertexWriter(DataSourceStreamArrowWriter):
    """Reads each task's input range, applies the UDF (if any) and writes to the output buffers,
    the sink and the dead letter."""

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

    def messages(self, first: int, last: int) -> Any:
        """The input messages ``first..last`` as one Arrow batch (``seq, id, payload``)."""
        if self.plan.input is not None:
            return self.plan.buffer(self.plan.input).read_batch(first, last)
        from tidal.spark.sources import generate

        return generate(self.plan, first, last)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        out_ids: list[Any] = []
        out_payloads: list[Any] = []
        dead: list[tuple[str, bytes, str]] = []
        transform = self.transform()
        sink = self.sink("sink")
        freeze_imports()  # the UDF's and the sink's modules are imported by now
        written = 0
        step = piece_size(self.plan)
        prefix = f"{self.plan.vertex}:"
        for a, b in pieces(iterator, step):
            batch = self.messages(a, b)
            ids, payloads = batch.column("id"), batch.column("payload")
            if transform is not None:
                outcome = transform.apply(ids, payloads)
                ids, payloads = outcome.ids, outcome.payloads
                dead.extend(outcome.dead)
            if len(ids) and self.plan.outputs:
                self._append(f"{prefix}{a}-{b}", pc.binary_join_element_wise(prefix, ids, ""), payloads, step)
            written += len(ids)
            if sink is not None:  # kept for the sink's one write per task
                out_ids.append(ids)
                out_payloads.append(payloads)
        sink_part = None
        if sink is not None:
            ids = pa.concat_arrays(out_ids) if out_ids else pa.array([], pa.string())
            payloads = pa.concat_arrays(out_payloads) if out_payloads else pa.array([], pa.binary())
            sink_part = sink.write(ids, payloads)
        dead_part = None
        if dead:
            dead_part = self.sink("dead-letter").write(
                pa.array([d[0] for d in dead], pa.string()),
                pa.array([d[1] for d in dead], pa.binary()),
                [d[2] for d in dead],
            )
        context = TaskContext.get()
        return _Written(written, context.partitionId() if context else -1, sink_part, dead_part, len(dead))

    def _append(self, key: str, ids: Any, payloads: Any, most: int) -> None:
        """A piece's output to every output buffer (fan-out) under its key, in appends of at most
        ``most`` messages (a flatmap may return many more than it read); waits while full."""
        n = len(ids)
        for j, at in enumerate(range(0, n, most)):
            part = key if n <= most else f"{key}/{j}"
            part_ids, part_payloads = ids.slice(at, most), payloads.slice(at, most)
            for name in self.plan.outputs:
                out = self.plan.buffer(name)
                deadline = time.monotonic() + _FULL_WAIT_SECONDS
                while True:
                    try:
                        out.append_batch(part, part_ids, part_payloads)
                        break
                    except errors.BufferFull:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.05)  # back pressure: wait for the reader downstream to commit

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        freeze_imports()
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
