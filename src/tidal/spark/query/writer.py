"""The writer of every vertex query: read a task's input range, run the UDF, write the outputs.

Spark hands each writer task the rows the reader made (one input range per partition,
:mod:`tidal.spark.batch.admission`). The task reads those messages from the input buffer (or builds
the generator's), applies the vertex's UDF on Arrow batches, appends the result to every output
buffer (fan-out), and writes the sink and the dead letter. The commit, once every task of the
micro-batch succeeded, commits the sink, trims the input and records the batch: its tasks (the
replicas that really ran), its messages in and out, and the seconds its tasks spent working
(busy time, which gives the controller a processing rate per replica).

**Exactly once.** A task writes its output in pieces, each made of a fixed run of input sequences
and appended under the key ``<vertex>:<first>-<last>`` (per-batch de-duplication,
:mod:`tidal.isb.base`): a replayed task rewrites keys the output buffer already holds, whatever
the UDF returns the second time. The input is trimmed only in the commit.

**Source time and delivery delay.** Every message read carries its source time (``t``,
:mod:`tidal.isb.segments`); the outputs keep their input's, and a sink's task hands the commit a
sample of the source times it wrote, which the commit turns into the batch's delivery delays
(:mod:`tidal.scaling.latency`) and records with the batch.

**A MonoVertex** is a vertex with a source and a sink: its tasks read the source, run the
transformer and write the sink, and nothing goes to a buffer (:mod:`tidal.spec.mono`).

**The UDF runs inside the writer task**, on Arrow batches. A separate ``mapInArrow`` stage would
add a third Python process per task and an Arrow round trip through the JVM for the same work.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from tidal import errors
from tidal.scaling.latency import TimeSample, delays_at, time_sample
from tidal.spark.batch import side_inputs, stores
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.heap import freeze_imports
from tidal.spark.batch.pieces import piece_size, pieces
from tidal.spark.batch.usage import TaskUsage

__all__ = ["Step", "VertexWriter", "Written"]

_FULL_WAIT_SECONDS = 300.0


@dataclass(slots=True)
class Step:
    """What one member of the query's chain did in a task."""

    rows: int = 0  # messages its function got
    written: int = 0  # messages it passed on
    busy: float = 0.0  # seconds in its function
    dead: int = 0
    dropped: int = 0  # all of them: tagged DROP, no output edge's conditions, and the two below
    full: int = 0  # at a full buffer of an onFull: discardLatest edge
    exhausted: int = 0  # its routed sink gave up after its retries (onFailure: drop)


@dataclass
class Written(WriterCommitMessage):
    written: int
    partition: int
    sink_part: Any = None
    dead_part: Any = None  # each member's dead-letter part, in chain order
    dead: int = 0
    busy: float = 0.0  # seconds the task spent reading, transforming and writing
    sample: TimeSample | None = None  # a sink's: the source times of what it wrote
    steps: list[Step] | None = None  # each member's share, in chain order
    peak_rss: float | None = None  # the task's Python worker at its most (bytes; None: unknown)
    cpu: float = 0.0  # CPU seconds the task's worker used
    retried: int = 0  # message writes its routed sink repeated (tidal.spark.sinks.routes)


def _log_drop(vertex: str, buffer: str, n: int) -> None:
    import logging

    logging.getLogger("tidal.writer").warning(
        "%s: %d message(s) dropped: buffer %s is full (onFull: discardLatest)", vertex, n, buffer
    )


class VertexWriter(DataSourceStreamArrowWriter):
    """Reads each task's input range, applies the UDF (if any) and writes to the output buffers,
    the sink and the dead letter."""

    def __init__(self, config: QueryConfig) -> None:
        self.config = config
        self._transforms: list[Any] | None = None
        self._sinks: dict[tuple[str, str], Any] = {}

    # Built lazily: the writer object is pickled to the tasks, the functions and the sinks are not.
    def transforms(self) -> list[Any]:
        """Each member's function in chain order (None where it has none: a source, the sink)."""
        if self._transforms is None:
            from tidal.spark.query.udf import Transform

            self._transforms = [
                None if udf is None else Transform(vertex, udf, dead_letter=udf.dead_letter is not None)
                for vertex, udf in self.config.steps()
            ]
        return self._transforms

    def transform(self) -> Any:
        """The head's function (a vertex that is not chained has only that one)."""
        return self.transforms()[0]

    def sink(self, role: str, vertex: str | None = None) -> Any:
        """The chain's sink (``role`` ``sink``), or the dead letter of ``vertex`` (the head's by
        default)."""
        vertex = vertex or (self.config.tail if role == "sink" else self.config.vertex)
        if (role, vertex) not in self._sinks:
            from tidal.spark.sinks.connector import build_sink

            at = f"vertices[{vertex}]"
            if role == "sink":
                spec, at = self.config.sink, f"{at}.sink"
            else:
                udf = dict(self.config.steps())[vertex]
                spec, at = (udf.dead_letter if udf else None), f"{at}.udf.deadLetter"
            self._sinks[role, vertex] = (
                None if spec is None else build_sink(spec, vertex, self.config.run_dir, at, role)
            )
        return self._sinks[role, vertex]

    def messages(self, first: int, last: int, kpart: int = -1, t0: float = math.nan) -> Any:
        """The input messages ``first..last`` (of Kafka partition ``kpart``; the generator's from
        its clock start ``t0``) as one Arrow batch (``seq, id, payload, t``)."""
        if self.config.input is not None:
            return stores.buffer(self.config, self.config.input).read_batch(first, last)
        assert self.config.source is not None, "a vertex with no input buffer reads its source"
        from tidal.spark.sources.connector import source_connector

        return source_connector(self.config.source).read_range(self.config, kpart, first, last, t0)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        started = time.perf_counter()
        usage = TaskUsage()
        out_ids: list[Any] = []
        out_payloads: list[Any] = []
        out_times: list[Any] = []
        out_tags: list[tuple[str, ...]] = []  # for a sink that routes by them (a MonoVertex's bypass)
        members = self.config.members
        dead: list[list[tuple[str, bytes, str]]] = [[] for _ in members]
        if self.config.side_inputs:  # before the handler's module is imported (it may copy the path)
            side_inputs.point_pynumaflow(self.config.run_dir, self.config.run_id)
        transforms = self.transforms()
        steps = [Step() for _ in members]
        sink = self.sink("sink")
        freeze_imports()  # the UDF's and the sink's modules are imported by now
        written = 0
        step = piece_size(self.config)
        tail = len(members) - 1
        prefix = f"{self.config.tail}:"
        # A chain's pieces are keyed by the head's input range, under a name no vertex's own can be.
        scope = prefix if tail == 0 else f"{self.config.tail}<{self.config.vertex}:"
        for kpart, a, b, t0 in pieces(iterator, step):
            if self.config.side_inputs and written == 0:  # the task's reader has written them by now
                side_inputs.require(
                    self.config.run_dir, self.config.side_inputs, self.config.vertex, self.config.run_id
                )
            batch = self.messages(a, b, kpart, t0)
            ids, payloads, times = batch.column("id"), batch.column("payload"), batch.column("t")
            keys = batch.column("keys") if "keys" in batch.schema.names else None
            tags = None
            for i, transform in enumerate(transforms):
                at = time.perf_counter()
                steps[i].rows += len(ids)
                if transform is not None:
                    outcome = transform.apply(ids, payloads, times, keys)
                    keys = outcome.keys_of(keys)
                    ids, payloads, times = outcome.ids, outcome.payloads, outcome.times(times)
                    tags = outcome.tags
                    dead[i].extend(outcome.dead)
                    steps[i].dropped += outcome.dropped
                if i < tail:  # passed on as the buffer between them would: named by who wrote it
                    ids = pc.binary_join_element_wise(f"{members[i]}:", ids, "")
                steps[i].written += len(ids)
                steps[i].busy += time.perf_counter() - at
            if len(ids) and self.config.outputs:
                key = f"{scope}{a}-{b}" if kpart < 0 else f"{scope}p{kpart}/{a}-{b}"
                masks, unrouted = self._routing(tags, len(ids))
                steps[tail].written -= unrouted
                steps[tail].dropped += unrouted
                written -= unrouted
                named = pc.binary_join_element_wise(prefix, ids, "")
                full = self._append(key, named, payloads, step, times, masks, keys)
                steps[tail].dropped += full
                steps[tail].full += full
            written += len(ids)
            if sink is not None:  # kept for the sink's one write per task
                # A MonoVertex's sink gets its source's ids as a source vertex would pass them on.
                mono = tail == 0 and self.config.source is not None
                out_ids.append(pc.binary_join_element_wise(prefix, ids, "") if mono else ids)
                out_payloads.append(payloads)
                out_times.append(times)
                out_tags.extend(tags if tags is not None else [()] * len(ids))
        sink_part = sample = None
        retried = 0
        if sink is not None:
            ids = pa.concat_arrays(out_ids) if out_ids else pa.array([], pa.string())
            payloads = pa.concat_arrays(out_payloads) if out_payloads else pa.array([], pa.binary())
            times = pa.concat_arrays(out_times) if out_times else pa.array([], pa.float64())
            # A pynumaflow sink's Datum carries each message's source time as its event time.
            takes_times = getattr(sink, "takes_times", False)
            if getattr(sink, "takes_tags", False):
                sink_part = sink.write(ids, payloads, times=times, tags=out_tags)
            elif takes_times:
                sink_part = sink.write(ids, payloads, times=times)
            else:
                sink_part = sink.write(ids, payloads)
            sample = time_sample(times.to_numpy())
            exhausted = getattr(sink_part, "dropped", 0)  # a routed sink's, after its retries
            steps[tail].dropped += exhausted
            steps[tail].exhausted += exhausted
            retried = getattr(sink_part, "retried", 0)
        dead_parts: list[Any] = []
        for i, letters in enumerate(dead):
            steps[i].dead = len(letters)
            dead_parts.append(
                None
                if not letters
                else self.sink("dead-letter", members[i]).write(
                    pa.array([d[0] for d in letters], pa.string()),
                    pa.array([d[1] for d in letters], pa.binary()),
                    [d[2] for d in letters],
                )
            )
        context = TaskContext.get()
        partition = context.partitionId() if context else -1
        busy = time.perf_counter() - started
        peak, cpu = usage.end()
        return Written(
            written,
            partition,
            sink_part,
            dead_parts,
            sum(len(d) for d in dead),
            busy,
            sample,
            steps,
            peak,
            cpu,
            retried,
        )

    def messages_in(self, batch: Any) -> int:
        """The messages the batch (a :class:`~tidal.isb.control.BatchRange`) read, as counted."""
        return int(batch.count)

    def _routing(self, tags: list[tuple[str, ...]] | None, n: int) -> tuple[list[Any], int]:
        """Which of ``n`` outputs with ``tags`` each output edge takes (a mask, None: all of
        them), and how many no edge takes (:mod:`tidal.spec.routing`: dropped, as Numaflow does)."""
        routes = self.config.routes
        if all(r is None for r in routes):
            return [None] * len(routes), 0
        import pyarrow as pa

        from tidal.spec.routing import tags_match

        seen = tags if tags is not None else [()] * n
        taken = [False] * n
        masks: list[Any] = []
        for r in routes:
            if r is None:
                masks.append(None)
                taken = [True] * n
                continue
            operator, values = r
            mask = [tags_match(operator, values, t) for t in seen]
            taken = [a or b for a, b in zip(taken, mask, strict=True)]
            masks.append(pa.array(mask, pa.bool_()))
        return masks, n - sum(taken)

    def _append(
        self,
        key: str,
        ids: Any,
        payloads: Any,
        most: int,
        times: Any = None,
        masks: list[Any] | None = None,
        keys: Any = None,
    ) -> int:
        """A piece's output to every output buffer (fan-out) under its key, in appends of at most
        ``most`` messages (a flatmap may return many more than it read), with their source
        ``times`` (None: now); waits while full, or drops at an ``onFull: discardLatest`` edge.
        ``masks``: what each output takes (None: all). Returns the messages dropped."""
        dropped = 0
        for k, name in enumerate(self.config.outputs):
            mask = masks[k] if masks is not None else None
            discard = self.config.discard[k]
            if mask is None:
                dropped += self._append_to(name, key, ids, payloads, most, times, keys, discard)
            elif mask.true_count:
                chosen = None if times is None else times.filter(mask)
                chosen_keys = None if keys is None else keys.filter(mask)
                dropped += self._append_to(
                    name, key, ids.filter(mask), payloads.filter(mask), most, chosen, chosen_keys, discard
                )
        return dropped

    def _append_to(
        self,
        name: str,
        key: str,
        ids: Any,
        payloads: Any,
        most: int,
        times: Any,
        keys: Any = None,
        discard: bool = False,
    ) -> int:
        n = len(ids)
        dropped = 0
        for j, at in enumerate(range(0, n, most)):
            part = key if n <= most else f"{key}/{j}"
            part_ids, part_payloads = ids.slice(at, most), payloads.slice(at, most)
            part_times = None if times is None else times.slice(at, most)
            part_keys = None if keys is None else keys.slice(at, most)
            out = stores.buffer(self.config, name)
            if discard and out.stats().full:  # Numaflow's discardLatest: the newest messages go
                dropped += len(part_ids)
                _log_drop(self.config.tail, name, len(part_ids))
                continue
            deadline = time.monotonic() + _FULL_WAIT_SECONDS
            while True:
                try:
                    out.append_batch(part, part_ids, part_payloads, part_times, part_keys)
                    break
                except errors.BufferFull:
                    if discard:
                        dropped += len(part_ids)
                        _log_drop(self.config.tail, name, len(part_ids))
                        break
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)  # back pressure: wait for the reader downstream to commit
        return dropped

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        freeze_imports()
        written = [m for m in messages if isinstance(m, Written)]
        sink = self.sink("sink")
        delays = None
        if sink is not None:
            sink.commit(batchId, [m.sink_part for m in written])
            # Delivered now: the delay of every message is now minus its source time.
            delays = delays_at([m.sample for m in written if m.sample is not None], time.time())
        members = self.config.members
        for i, vertex in enumerate(members):
            parts = [m.dead_part[i] if isinstance(m.dead_part, list) else m.dead_part for m in written]
            if any(m.steps[i].dead if m.steps else m.dead for m in written):
                self.sink("dead-letter", vertex).commit(batchId, parts)
        control = stores.control(self.config)
        batch = control.batch_range(self.config.vertex)
        # Every task of the batch succeeded and its output is stored: trim the input now.
        # (A replay after a crash rewrites ids the output buffer already holds.) Not a reduce's:
        # its replay also needs the input, until Spark's commit log (BufferReader._trim_behind).
        if not self.config.reduce and batch is not None and batch.count and self.config.input is not None:
            stores.buffer(self.config, self.config.input).commit(batch.last)
        if self.config.source is not None:
            from tidal.spark.sources.connector import source_connector

            # The batch is stored downstream: a source that acknowledges upstream does it now.
            source_connector(self.config.source).stored(self.config)
        from tidal.isb.batch_ledger import MemberBatch  # in the driver only: the tasks need not import it

        chained = len(members) > 1
        follow = [
            MemberBatch(
                vertex,
                sum(m.steps[i].rows for m in written if m.steps),
                sum(m.steps[i].written for m in written if m.steps),
                busy=sum(m.steps[i].busy for m in written if m.steps),
                dead=sum(m.steps[i].dead for m in written if m.steps),
                delays=delays if i == len(members) - 1 else None,
                dropped=sum(m.steps[i].dropped for m in written if m.steps),
                full=sum(m.steps[i].full for m in written if m.steps),
                exhausted=sum(m.steps[i].exhausted for m in written if m.steps),
            )
            for i, vertex in enumerate(members)
            if i > 0
        ]
        control.record_batch(
            self.config.vertex,
            batchId,
            self.tasks(messages, len(batch.parts) if batch is not None and batch.parts else None),
            self.messages_in(batch) if batch is not None else 0,
            sum(m.written for m in written),  # the chain's: what its tail passed on
            busy=sum(m.busy for m in written),  # the chain's: what its replicas spent
            dead=sum(m.steps[0].dead if m.steps else m.dead for m in written),
            delays=None if chained else delays,
            parts=[max(0, last - first + 1) for first, last in batch.parts] if batch is not None else (),
            members=follow,
            peak_rss=max((m.peak_rss for m in written if m.peak_rss is not None), default=None),
            cpu=sum(m.cpu for m in written),
            dropped=sum(m.steps[0].dropped for m in written if m.steps),
            full=sum(m.steps[0].full for m in written if m.steps),
            exhausted=sum(m.steps[0].exhausted for m in written if m.steps),
            retried=sum(m.retried for m in written),
        )

    def tasks(self, messages: list[WriterCommitMessage | None], parts: int | None) -> int:
        """The replicas that ran the batch: one writer task per read partition."""
        return len(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to undo: a retried batch rewrites the same ids, which the buffer de-duplicates."""
