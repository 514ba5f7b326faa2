"""Numaflow's accumulator window on Spark: a pynumaflow ``Accumulator`` per key, with progressive
output, exactly once.

A vertex ``udf: {reduce: module:StreamSorter, groupBy: {window: {accumulator: {timeout}}}}`` is
one Structured Streaming query (as every reduce vertex, :mod:`tidal.spark.query.reduce`):

    input rows (id, payload, source time, keys)
      → withWatermark(event time, allowedLateness)
      → groupBy(keys).applyInPandasWithState(…, EventTimeTimeout)   [this module's _Accumulate]
      → the messages the handler emitted, in emission order → AccumulatorWriter → output buffers

**Numaflow's semantics.** Per key, one handler ``handler(datums, output)`` lives as long as the
key's window: it gets the key's messages one by one (``Datum`` with ``watermark``, ``id``), puts
``Message``\\ s into ``output`` whenever it likes (``Message.from_datum`` keeps the value, keys
and event time), and its ``datums`` end when the watermark passes the key's latest event time
plus ``timeout`` (``numaflow-core``, ``windower/accumulator.rs``): "timeout reached", it flushes.

**Why replay.** A Spark task cannot keep a coroutine across micro-batches: all that survives a
batch is what the state store holds, serialised, in the checkpoint. Three ways were weighed:

(a) keep the key's messages in state and run the handler once, at timeout: right results, but
    nothing comes out until the key has been quiet for ``timeout`` — not what a stream sorter
    is for (Numaflow's emits as the watermark moves);
(b) **replay** (chosen): the state holds the key's messages in the order they were handed over,
    each with the watermark it was handed over with, and how many messages the handler has
    emitted. Each micro-batch that brings the key messages builds a *fresh* handler, feeds it
    every message so far through an async iterator this module controls, and when the handler
    asks for one beyond the last, takes what it has put into ``output``, writes only those past
    the count already written, and cancels it. At timeout the iterator ends instead, so the
    handler flushes, and the state is removed. The output is progressive, as Numaflow's; the
    price is O(n²) handler work over a key's lifetime of n messages (measured in
    ``docs/numaflow.md``), and **the handler must be deterministic**: given the same messages
    it emits the same messages in the same order (a stream sorter, a counter, a join do; one
    that reads a clock, a random number or an outside store does not);
(c) Spark 4's ``transformWithStateInPandas`` gives list state and timers, but still no live
    coroutine: the same replay, with the RocksDB provider it requires; ``applyInPandasWithState``
    with ``GroupStateTimeout.EventTimeTimeout`` gives exactly Numaflow's close rule
    (``setTimeoutTimestamp(latest event time + timeout)`` fires when the watermark passes it),
    and it works with the state store every reduce vertex uses.

**Watermarks.** Each message is handed over with Spark's watermark when its micro-batch started,
lowered below the key's earliest message of the batch (:func:`handed_watermark`), so a handler
that flushes at the watermark never gets a message behind one it flushed.

**Exactly once.** A replayed micro-batch starts from the state before it and gets the same input
(the reader trims a reduce's input only once Spark's commit log holds the batch), so a
deterministic handler emits the same messages, which go to the same writer task under the same
append key ``<vertex>:b<batch>/t<partition>`` (de-duplicated by the buffers). Each message's id
is ``<vertex>:<keys>@<window start ms>#<n>``: the key, the event time its window opened with, and
its place among the window's messages, the same in every replay and unique across a key's windows.

**Side inputs** reach the function from the buffer backend, once per task
(:mod:`tidal.spark.batch.side_input_relay`): it runs after the shuffle. A handler that reads one
is deterministic only while the value stays: a replay after a new value may emit other messages
than the first run did, and only those past the count already written go on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from pynumaflow.shared.asynciter import NonBlockingIterator
from pyspark.sql.datasource import WriterCommitMessage

from tidal.contracts import DROP
from tidal.spark.batch import side_input_relay
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.heap import freeze_imports
from tidal.spark.batch.pieces import piece_size
from tidal.spark.query.writer import VertexWriter, Written

__all__ = [
    "AccumulatorWriter",
    "KeyState",
    "Output",
    "Stored",
    "handed_watermark",
    "plan_accumulator",
    "replay",
]

OUTPUT_SCHEMA = "id string, payload binary, t double, keys array<string>, k string, n long"
STATE_SCHEMA = "datums string, emitted long, start double, latest double"

# One message of a key's window, as the state keeps it: id, payload, event time (s), keys, and
# the watermark (ms) it was handed over with.
Stored = tuple[str, bytes, float, list[str], int]


def handed_watermark(spark_ms: int, times: list[float], previous_ms: int) -> int:
    """The watermark (ms) a key's messages of one micro-batch are handed over with: Spark's when
    the batch started, but below the batch's earliest message for the key, and never below the
    one handed over before.

    Why lowered: Spark drops a message as late against the *previous* batch's watermark and
    reports the current one (``getCurrentWatermarkMs``), so a batch can bring messages at or
    before the current watermark. Handed that watermark, a stream sorter would flush past a
    message it is about to get. Lowered, no message at or before a watermark already handed over
    comes later: this batch's are above it, a later batch's above this batch's watermark."""
    mark = max(0, spark_ms)
    if times:
        mark = min(mark, math.ceil(min(times) * 1000) - 1)
    return max(mark, previous_ms)


def naive(seconds: float) -> datetime:
    """A moment as pynumaflow's server hands it (protobuf's ``ToDatetime()``: naive, in UTC), so
    handlers that compare with naive datetimes (the stream sorter's ``datetime.fromtimestamp``)
    run unchanged."""
    return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)


def _seconds(moment: datetime) -> float:
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


class Output(NonBlockingIterator[Any]):  # type: ignore[misc]  # pynumaflow is untyped
    """The handler's ``output``: what it puts is kept in order (no reader drains it). A
    ``NonBlockingIterator``, as the handler's signature says; ``put`` yields to the loop once,
    as pynumaflow's does."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        super().__init__()
        self.items: list[Any] = []

    async def put(self, item: Any) -> None:
        self.items.append(item)
        await asyncio.sleep(0)


async def _replay(make: Callable[[], Any], datums: list[Any], closed: bool) -> list[Any]:
    output = Output()
    loop = asyncio.get_running_loop()
    starved = asyncio.Event()

    async def feed() -> Any:
        for datum in datums:
            yield datum
        if not closed:
            starved.set()  # the handler asks beyond the last message: it has done all it can
            await loop.create_future()  # never resolved; cancelled below

    task = asyncio.ensure_future(make()(feed(), output))
    waiter = asyncio.ensure_future(starved.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    for pending in (task, waiter):
        if not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pending
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()
    return output.items


def replay(
    make: Callable[[], Any], datums: list[Any], closed: bool, loop: asyncio.AbstractEventLoop | None = None
) -> list[Any]:
    """Every message a fresh handler (``make()``) puts into ``output`` when fed ``datums``: up to
    the moment it asks for a message beyond the last one, or, ``closed``, until it returns (its
    ``datums`` ended: Numaflow's timeout)."""
    own = loop is None
    running = asyncio.new_event_loop() if loop is None else loop
    try:
        return running.run_until_complete(_replay(make, datums, closed))
    finally:
        if own:
            running.close()


class KeyState:
    """A key's window as the state store keeps it (``STATE_SCHEMA``): its messages in the order
    they were handed over, how many messages the handler has emitted, the event time the window
    opened with and the latest event time seen (the timeout counts from it)."""

    def __init__(self, datums: list[Stored], emitted: int, start: float, latest: float) -> None:
        self.datums, self.emitted, self.start, self.latest = datums, emitted, start, latest

    @classmethod
    def decode(cls, row: tuple[Any, ...] | None) -> KeyState:
        if row is None:
            return cls([], 0, 0.0, 0.0)
        raw, emitted, start, latest = row
        datums = [(i, base64.b64decode(p), float(t), list(k), int(w)) for i, p, t, k, w in json.loads(raw)]
        return cls(datums, int(emitted), float(start), float(latest))

    def encode(self) -> tuple[str, int, float, float]:
        raw = json.dumps([(i, base64.b64encode(p).decode(), t, k, w) for i, p, t, k, w in self.datums])
        return raw, self.emitted, self.start, self.latest

    def add(self, rows: list[Stored]) -> None:
        """``rows`` (one micro-batch's for this key) handed over in event-time order (then by
        id), so a replay hands them over in the same order."""
        ordered = sorted(rows, key=lambda r: (r[2], r[0]))
        if not self.datums and ordered:
            self.start = ordered[0][2]
        self.datums.extend(ordered)
        self.latest = max([self.latest, *(r[2] for r in ordered)])


class _Accumulate:
    """``applyInPandasWithState``'s function: per key and micro-batch, the state's update and the
    messages the handler emitted beyond those written before (see the module's docstring)."""

    def __init__(self, config: QueryConfig) -> None:
        assert config.udf is not None and config.udf.group_by is not None
        window = config.udf.group_by.window.accumulator
        assert window is not None
        self.config = config
        self.timeout_ms = round(window.timeout * 1000)
        self._make: Callable[[], Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def factory(self) -> Callable[[], Any]:
        """A fresh handler per replay: an ``Accumulator`` class built with ``reduceArgs`` (as
        ``AccumulatorAsyncServer(cls, init_args=…)`` builds one per key), or a function
        ``handler(datums, output)`` as it is."""
        if self._make is None:
            from tidal.spec.validate import resolve

            assert self.config.udf is not None and self.config.udf.reduce is not None
            target = resolve(self.config.udf.reduce, f"vertices[{self.config.vertex}].udf.reduce")
            args = list(self.config.udf.reduce_args)
            self._make = (lambda: target(*args)) if isinstance(target, type) else (lambda: target)
        return self._make

    def __call__(self, key: tuple[Any, ...], frames: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd  # type: ignore[import-untyped]

        if self.config.side_inputs:  # once per task, before the handler's module is imported
            side_input_relay.arrive(self.config)
        freeze_imports()
        keys = json.loads(key[0])
        current = KeyState.decode(state.get if state.exists else None)
        watermark = int(state.getCurrentWatermarkMs())
        rows: list[Stored] = []
        for frame in frames:
            for i, p, t, k in zip(frame["id"], frame["payload"], frame["t"], frame["keys"], strict=True):
                own = [str(x) for x in (k if k is not None else [])]
                rows.append((str(i), bytes(p), float(t), own, 0))
        previous = current.datums[-1][4] if current.datums else 0
        mark = handed_watermark(watermark, [r[2] for r in rows], previous)
        current.add([(i, p, t, k, mark) for i, p, t, k, _ in rows])
        deadline = round(current.latest * 1000) + self.timeout_ms
        # The key closes once the watermark passes its latest event time + timeout. Spark fires
        # that as a timeout, but calls with a key's messages first: when the watermark is already
        # past (a restarted query resumes its watermark ahead of a key's state, then a scale-up
        # restarts it again), the key closes here, for Spark refuses a timeout behind its
        # watermark (INVALID_TIMEOUT_TIMESTAMP, seen in test_accumulator's SIGKILL test).
        closed = bool(state.hasTimedOut) or deadline < watermark
        out = self.emit(keys, current, closed)
        if closed:
            state.remove()
        else:
            state.update(current.encode())
            state.setTimeoutTimestamp(deadline)
        if out:
            yield pd.DataFrame(out, columns=["id", "payload", "t", "keys", "k", "n"])

    def emit(self, keys: list[str], current: KeyState, closed: bool) -> list[tuple[Any, ...]]:
        """The handler's messages past ``current.emitted``, as output rows; counts them in."""
        from pynumaflow.accumulator import Datum

        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        datums = [
            Datum(keys=k, value=p, event_time=naive(t), watermark=naive(w / 1000), id_=i, headers={})
            for i, p, t, k, w in current.datums
        ]
        messages = replay(self.factory(), datums, closed, self._loop)
        label = f"{self.config.vertex}:{','.join(keys)}@{round(current.start * 1000)}"
        out: list[tuple[Any, ...]] = []
        for n in range(current.emitted, len(messages)):
            message = messages[n]
            if DROP in (message.tags or []):
                continue
            stamp = message.event_time
            t = _seconds(stamp) if stamp is not None else current.latest
            row = (f"{label}#{n}", bytes(message.value), t, list(message.keys or []), json.dumps(keys), n)
            out.append(row)
        current.emitted = max(current.emitted, len(messages))
        return out


def plan_accumulator(spark: Any, config: QueryConfig) -> Any:
    """The accumulator vertex's streaming DataFrame: one row per message its handlers emitted
    (``OUTPUT_SCHEMA``), each key's in the order they were emitted."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.streaming.state import GroupStateTimeout

    assert config.udf is not None and config.udf.group_by is not None
    group = config.udf.group_by
    raw = spark.readStream.format("tidal_vertex").options(**config.options()).load()
    events = raw.withColumn("et", F.timestamp_seconds("t")).withWatermark(
        "et", f"{int(group.allowed_lateness * 1000)} milliseconds"
    )
    keys = F.coalesce(F.col("keys"), F.array().cast("array<string>")) if group.keyed else F.array()
    keyed = events.withColumn("k", F.to_json(keys.cast("array<string>")))  # grouped by a column
    return keyed.groupBy("k").applyInPandasWithState(
        _Accumulate(config),
        outputStructType=OUTPUT_SCHEMA,
        stateStructType=STATE_SCHEMA,
        outputMode="append",
        timeoutConf=GroupStateTimeout.EventTimeTimeout,
    )


class AccumulatorWriter(VertexWriter):
    """Writes the handlers' messages to the outputs, exactly once (keyed appends, as a reduce's;
    its input is trimmed by the reader once Spark's commit log holds the batch)."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        import pyarrow as pa
        from pyspark import TaskContext

        started = time.perf_counter()
        rows = [row for batch in iterator for row in batch.to_pylist()]
        freeze_imports()
        context = TaskContext.get()
        partition = context.partitionId() if context else -1
        if not rows:
            return Written(0, partition, busy=time.perf_counter() - started)
        rows.sort(key=lambda r: (r["k"], r["n"]))  # each key's in emission order, whatever Spark gave
        if self.config.outputs:
            batch_id = context.getLocalProperty("streaming.sql.batchId") if context else None
            if batch_id is None:
                raise RuntimeError("an accumulator writer ran outside a streaming micro-batch")
            self._append(
                f"{self.config.vertex}:b{batch_id}/t{partition}",
                pa.array([r["id"] for r in rows], pa.string()),
                pa.array([r["payload"] for r in rows], pa.binary()),
                piece_size(self.config),
                pa.array([r["t"] for r in rows], pa.float64()),
                None,
                pa.array([r["keys"] for r in rows], pa.list_(pa.string())),
            )
        return Written(len(rows), partition, busy=time.perf_counter() - started)

    def tasks(self, messages: list[WriterCommitMessage | None], parts: int | None) -> int:
        """The replicas that ran: the batch's read partitions (the writer's tasks are the fixed
        shuffle partitions)."""
        return parts if parts is not None else len(messages)
