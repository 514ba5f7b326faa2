"""Reduce vertices on Spark's state store: keyed windows of event time, reduced by the user's handler.

A reduce vertex (``udf: {reduce: …, groupBy: …}``, :mod:`tidal.spec.reduce`) is one Structured
Streaming query with Spark's own stateful aggregation:

    input rows (id, payload, source time, keys)
      → withWatermark(event time, allowedLateness)
      → groupBy(window(...) | session_window(...), keys)  → collect_list of the messages
      → [append mode: each window once, when the watermark passes its end]
      → the handler, in the writer's tasks, once per key and window → the output buffers

**Why Spark's state store.** The open windows' messages live in the query's checkpoint (RocksDB
or HDFS-backed state, versioned per micro-batch), not in Tidal's buffers: the input is trimmed
once Spark's commit log holds a batch (so a replay always finds its input), a restart (or a
SIGKILL) resumes from the last committed state, and a replayed batch produces the same closed
windows, which the output buffers de-duplicate (each task's appends are keyed
``<vertex>:b<batch>/t<partition>``). Exactly once.

**Partitions**: the state is split by key into ``partitions`` shuffle partitions (recorded in
the checkpoint at the first batch), in RocksDB; a running vertex's can be moved to another count
(:mod:`tidal.spark.run.repartition`), which Numaflow cannot. What scales on its own is the read
side (replicas are the read tasks, as for every vertex) and the executors.

**Watermark.** Spark's, one per input (each edge into the vertex: the id's first part names
the vertex that wrote the message): the latest event time the input sent, minus
``allowedLateness`` + ``watermark.maxDelay``; the vertex's is their minimum (Spark's
``multipleWatermarkPolicy=min``), so a join does not drop a slower input's messages as late
because a faster one moved on, as Numaflow's watermark is the minimum of its inputs'. A window's
result is written when the watermark passes its end, and a message older than the watermark is
dropped (Spark's ``numRowsDroppedByWatermark``). Spark's moves only with rows; Numaflow's moves
on in an idle pipeline: with ``watermark.idleSource`` the reader appends control rows that carry
a quiet input's watermark on (:mod:`tidal.spark.batch.idle`); the aggregation keys them
:data:`~tidal.spark.batch.idle.CONTROL_KEY` and the writer skips those windows. Spark closes
windows in the batch after the one that moved the watermark; a restarted query would run that
batch only when a message comes, so a reduce's reader asks for one batch at each start
(:meth:`tidal.spark.batch.readers.BufferReader._wake`).

**The handler** is pynumaflow's ``ReduceStreamer`` on a ``streaming: true`` window (what it put on
its output, once the window closes: :mod:`tidal.spark.query.reduce_stream`), or its ``Reducer``
(a class, built per key and window with ``reduceArgs``, as ``ReduceAsyncServer(cls,
init_args=...)`` builds it) or a reduce function, ``async`` or not: ``handler(keys, datums, md)``
with ``md.interval_window.start/end``; an async handler gets ``datums`` as an async iterator, a
plain one as an iterator. Its messages go on with their keys; their event (source) time is the
window's end minus 1 ms, as Numaflow sets it, so a reduce downstream windows them in the window
they summarise, and a sink's delivery delay counts from the window's end. Output ids are
``<vertex>:<keys>@<start ms>-<end ms>`` (``.<k>`` when the handler returns several).

**Side inputs.** The handler runs after the shuffle, on a host no reader task of the batch may
have run on; before it runs, the task fetches the side inputs' current values from the buffer
backend and writes them where pynumaflow reads them (:mod:`tidal.spark.batch.side_input_relay`).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from tidal.contracts import DROP
from tidal.spark.batch import side_input_relay, stores
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.heap import freeze_imports
from tidal.spark.batch.idle import CONTROL_KEY, CONTROL_MARK, is_control
from tidal.spark.batch.pieces import piece_size
from tidal.spark.query.writer import VertexWriter, Written
from tidal.spec.sdk_kinds import SdkKind, reduce_kind

__all__ = ["ReduceWriter", "plan_reduce"]

REDUCE_ROWS_SCHEMA = "id string, payload binary, t double, keys array<string>"


def plan_reduce(spark: Any, config: QueryConfig) -> Any:
    """The reduce vertex's streaming DataFrame: one row per closed window and key, with the
    window's messages (``w: struct<start, end>, k: array<string>, datums: array<struct>``)."""
    from pyspark.sql import functions as F  # noqa: N812

    assert config.udf is not None and config.udf.group_by is not None
    group = config.udf.group_by
    if group.window.accumulator is not None:  # a handler per key, not per window
        from tidal.spark.query.accumulator import plan_accumulator

        return plan_accumulator(spark, config)
    raw = spark.readStream.format("tidal_vertex").options(**config.options()).load()
    delay = f"{round((group.allowed_lateness + config.max_delay) * 1000)} milliseconds"

    def watermarked(frame: Any) -> Any:
        return frame.withColumn("et", F.timestamp_seconds("t")).withWatermark("et", delay)

    if len(config.origins) > 1:  # a join: a watermark per input, Spark's global one their minimum
        origin = F.substring_index("id", ":", 1)
        parts = [watermarked(raw.filter(origin == o)) for o in config.origins]
        events = parts[0]
        for part in parts[1:]:
            events = events.unionByName(part)
    else:
        events = watermarked(raw)
    window = group.window
    if window.fixed is not None:
        bucket = F.window("et", f"{int(window.fixed.length * 1000)} milliseconds")
    elif window.sliding is not None:
        bucket = F.window(
            "et",
            f"{int(window.sliding.length * 1000)} milliseconds",
            f"{int(window.sliding.slide * 1000)} milliseconds",
        )
    else:
        assert window.session is not None
        bucket = F.session_window("et", f"{int(window.session.timeout * 1000)} milliseconds")
    keys = (
        F.coalesce(F.col("keys"), F.array().cast("array<string>"))
        if group.keyed
        else F.array().cast("array<string>")
    )
    # An idle watermark's control row (tidal.spark.batch.idle) moves the watermark, then sits in
    # windows of its own key, which the writer skips.
    keys = F.when(F.col("id").contains(CONTROL_MARK), F.array(F.lit(CONTROL_KEY))).otherwise(keys)
    return events.groupBy(bucket.alias("w"), keys.alias("k")).agg(
        F.collect_list(F.struct("id", "payload", "t", "keys")).alias("datums")
    )


def _millis(moment: Any) -> int:
    stamp = moment if isinstance(moment, datetime) else datetime.fromisoformat(str(moment))
    return round((stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp() * 1000)


class _Handler:
    """The user's reducer, called once per key and window as pynumaflow's server calls it."""

    def __init__(self, ref: Any, args: list[Any], path: str) -> None:
        from tidal.spec.validate import resolve

        self.target = resolve(ref, path)
        self.args = list(args)
        self.streams = reduce_kind(self.target) is SdkKind.REDUCE_STREAM
        self._loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, keys: list[str], datums: list[Any], start: datetime, end: datetime) -> list[Any]:
        from pynumaflow.reducer import IntervalWindow, Metadata

        target = self.target
        fn = target(*self.args).handler if isinstance(target, type) else target
        md = Metadata(interval_window=IntervalWindow(start=start, end=end))
        if self.streams:  # a ReduceStreamer: what it put on its output (tidal.spark.query.reduce_stream)
            from tidal.spark.query.reduce_stream import streamed

            return list(self._run(streamed(fn, keys, datums, start, end)))
        if inspect.iscoroutinefunction(fn):

            async def stream() -> AsyncIterator[Any]:
                for d in datums:
                    yield d

            result = self._run(fn(keys, stream(), md))
        else:
            result = fn(keys, iter(datums), md)
        return list(result)

    def _run(self, coro: Any) -> Any:
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)


class ReduceWriter(VertexWriter):
    """Writes each closed window's reduction to the outputs (exactly once: keyed appends).

    Its commit leaves the input alone: the reader trims it once Spark's commit log holds the
    batch (:meth:`tidal.spark.batch.readers.BufferReader._trim_behind`). Trimmed here, a driver killed
    between this commit and the commit log lost the batch's open windows: the replay started
    from the state before the batch, over an input already gone."""

    def _handler(self) -> _Handler:
        if getattr(self, "_reducer", None) is None:
            assert self.config.udf is not None
            at = f"vertices[{self.config.vertex}].udf.reduce"
            self._reducer = _Handler(self.config.udf.reduce, self.config.udf.reduce_args, at)
        return self._reducer

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        import pyarrow as pa
        from pynumaflow.reducer import Datum
        from pyspark import TaskContext

        started = time.perf_counter()
        rows = [row for batch in iterator for row in batch.to_pylist() if list(row["k"]) != [CONTROL_KEY]]
        freeze_imports()
        context = TaskContext.get()
        partition = context.partitionId() if context else -1
        if not rows:
            return Written(0, partition, busy=time.perf_counter() - started)
        if self.config.side_inputs:  # after the shuffle: no partition carried them to this host
            side_input_relay.arrive(self.config)  # before the handler's module is imported
        handler = self._handler()
        vertex = self.config.vertex
        ids: list[str] = []
        payloads: list[bytes] = []
        times: list[float] = []
        keys_out: list[list[str] | None] = []
        # In window-and-key order, so a replay cuts the same appends whatever order Spark gave.
        rows.sort(key=lambda r: (_millis(r["w"]["start"]), _millis(r["w"]["end"]), r["k"]))
        for row in rows:
            start_ms, end_ms = _millis(row["w"]["start"]), _millis(row["w"]["end"])
            start, end = (datetime.fromtimestamp(ms / 1000, UTC) for ms in (start_ms, end_ms))
            watermark = datetime.fromtimestamp(end_ms / 1000 - 0.001, UTC)  # Numaflow's: end - 1 ms
            members = sorted(row["datums"], key=lambda d: (d["t"], d["id"]))
            datums = [
                Datum(
                    keys=list(d["keys"] or []),
                    value=d["payload"],
                    event_time=datetime.fromtimestamp(d["t"], UTC),
                    watermark=watermark,
                    headers={},
                )
                for d in members
            ]
            out = handler(list(row["k"]), datums, start, end)
            label = f"{vertex}:{','.join(row['k'])}@{start_ms}-{end_ms}"
            for k, message in enumerate(out):
                if DROP in (message.tags or []):
                    continue
                ids.append(label if len(out) == 1 else f"{label}.{k}")
                payloads.append(bytes(message.value))
                times.append(end_ms / 1000 - 0.001)  # Numaflow's: the window's end - 1 ms
                keys_out.append(list(message.keys) if message.keys is not None else list(row["k"]))
        if ids and self.config.outputs:
            batch_id = context.getLocalProperty("streaming.sql.batchId") if context else None
            if batch_id is None:
                raise RuntimeError("a reduce writer ran outside a streaming micro-batch")
            self._append(
                f"{vertex}:b{batch_id}/t{partition}",
                pa.array(ids, pa.string()),
                pa.array(payloads, pa.binary()),
                piece_size(self.config),
                pa.array(times, pa.float64()),
                None,
                pa.array(keys_out, pa.list_(pa.string())),
            )
        return Written(len(ids), partition, busy=time.perf_counter() - started)

    def messages_in(self, batch: Any) -> int:
        """The batch's messages, not the idle watermark's control rows (no message of a user's).

        In the driver, before the reader trims the batch's input (at the next batch's offsets).
        A range already trimmed is not this batch's: a no-data batch (the one that closes the
        windows the batch before moved the watermark past) finds the last batch's range
        recorded, which it must not count again."""
        if not batch.count or self.config.input is None:
            return int(batch.count)
        buffer = stores.buffer(self.config, self.config.input)
        if buffer.committed() >= batch.last:
            return 0
        if self.config.idle is None:
            return int(batch.count)
        ids = buffer.read_batch(batch.first, batch.last).column("id")
        return int(batch.count) - sum(1 for i in ids.to_pylist() if is_control(i))

    def tasks(self, messages: list[WriterCommitMessage | None], parts: int | None) -> int:
        """The replicas that ran: the batch's read partitions (the writer's tasks are the fixed
        shuffle partitions)."""
        return parts if parts is not None else len(messages)
