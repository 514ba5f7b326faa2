"""Admission: how much of its input a vertex's next micro-batch takes, and how it is split into tasks.

**The partition count is the replica count.** At every micro-batch the reader reads the vertex's
replicas from the control record **once**, in ``latestOffset`` (:func:`admit`), and the same
count splits that batch in ``partitions`` (:func:`partition_batch`): a change the controller
makes between the two calls waits for the next batch, so a batch is never split by a count it
was not admitted for. Admission takes at most ``replicas × readBatchSize`` messages, and no more
than the output buffers have room for (:func:`output_room`); replicas 0, or an output buffer
over its usage limit (back pressure), returns the start offset, which idles the query.

**On a cluster manager, only the replicas that have a task slot are admitted.**
A scale-up that needs new executors would otherwise take ``replicas × readBatchSize`` into the
next batch at once, split into as many tasks, while the executors that would run most of them
take seconds to come: the tasks queue behind the old slots or wait for the new executors' first
(cold) tasks, and the batch commits nothing until its slowest task is done. Measured on the
cluster's bursts (four 2-core workers): ``enrich`` 1 → 6 needed three executors, which
registered 2–4 s after the request and finished a first task 6–13 s after it; the vertex
processed nothing for 7 s and more. Numaflow's pending pods read nothing either: a replica
counts once it can run. So the executor allocator writes each vertex's share of the registered
cores (:meth:`~tidal.isb.control.ControlStore.set_slots`) and a batch takes
``min(replicas, slots)`` replicas (:func:`~tidal.scaling.executors.slotted`: at least one, since
the share is proportional and a vertex with one replica beside a large one would get none). The
controller sees the rest as not ready, as it did. In local mode there is no allocator and no cap.

**A join's input buffer has a writer per edge into it.** Each vertex's reader runs in a process of
its own, so two writers of one buffer would both see the same free room and together overfill
it. A writer of a shared buffer claims, in the control record and in the transaction that reads
the room, what its batch may write there; the others take that room as taken until its next
admission (:meth:`~tidal.isb.control.ControlStore.claiming`).

**A rate limit is applied here** (``limits.rateLimit``, :mod:`tidal.scaling.throttle`): admission
runs in the one process that plans the vertex's micro-batches, for all its replicas and
executors, so the budget needs no store to share it (Numaflow's needs Redis). What a batch takes
comes out of the current second's budget; what it could not use (fewer messages than admitted)
goes back to that second. A budget spent idles the query until the next second.

**Replays split as before.** The split of a micro-batch is recorded with its range
(:class:`~tidal.isb.control.BatchRange`); a replay after a crash reuses it even when the replica
count changed in between, so every task of a replay covers the same input ranges as before and
writes the same de-duplication keys.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from pyspark.sql.datasource import InputPartition

from tidal.scaling.executors import slotted
from tidal.scaling.throttle import Throttle
from tidal.spark.batch import side_inputs, stores
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.heap import freeze_imports
from tidal.spark.batch.side_inputs import Carried

if TYPE_CHECKING:  # the control record pulls in pyarrow: not before the daemon forks (query/daemon)
    from tidal.isb.control import ControlStore, RoomClaims

__all__ = ["Admission", "Range", "admissible", "admit", "output_room", "partition_batch", "split", "task_row"]


@dataclass
class Range(InputPartition):
    first: int
    last: int
    index: int
    t0: float = math.nan  # the generator's: when its load shape started (its messages' source times)
    side: Carried | None = None  # the side inputs' values for the task (tidal.spark.batch.side_inputs)


class Admission(NamedTuple):
    """The end offset of the next micro-batch and the replica count that admitted it."""

    end: int
    replicas: int


def split(first: int, last: int, replicas: int) -> list[Range]:
    """``first..last`` in at most ``replicas`` contiguous ranges (one task each)."""
    if last < first:
        return []
    n = max(1, min(replicas, last - first + 1))
    step = -(-(last - first + 1) // n)
    return [Range(a, min(last, a + step - 1), i) for i, a in enumerate(range(first, last + 1, step))]


def output_room(
    config: QueryConfig, expansion: float | None = None, claims: RoomClaims | None = None
) -> int | None:
    """How many input messages the next micro-batch may take without overfilling an output
    buffer (None when the vertex has no outputs, or only ``onFull: discardLatest`` ones, which
    drop at a full buffer instead): 0 once any output is over its usage limit
    (back pressure); otherwise the least free room (``bufferMaxLength`` minus what it holds and,
    in a buffer other vertices write too, what their batches claimed), divided by how much the
    vertex's last batches expanded (``expansion``; None: read it; a flatmap writes more than it
    reads).

    A vertex's micro-batches run one after the other, so the room seen here is still there when
    the batch writes, but for what other vertices write into the same buffer: a join's input
    buffer has a writer per edge into it, each planning its batches in a process of its own. So
    a writer of a shared buffer claims the room its batch may fill (:func:`admit`, in the control
    record), and sees the room the others' batches claimed as taken. This is what keeps a task
    from waiting on a full buffer: a task that waits holds one of Spark's task slots, and on a
    small cluster the downstream vertex that would drain the buffer may need that very slot (the
    bench deadlocked this way with ``local[2]`` before admission looked at the room; two writers
    of a join, both waiting, hold both slots).
    """
    room: int | None = None
    for name, discards, shared in zip(config.outputs, config.discard, config.shared, strict=True):
        if discards:  # onFull: discardLatest: the writer drops what does not fit; no back pressure
            continue
        stats = stores.buffer(config, name).stats()
        claimed = claims.others(name, config.vertex) if claims is not None and shared else 0
        free = 0 if stats.full else max(0, stats.limits.max_length - stats.length - claimed)
        room = free if room is None else min(room, free)
    if not room:
        return room
    if expansion is None:
        expansion = stores.control(config).expansion(config.vertex)
    return int(room / expansion)


def admit(config: QueryConfig, start: int, available: int) -> Admission:
    """The next micro-batch: at most replicas × readBatchSize past ``start``, no more than the
    outputs have room for; ``start`` itself (idle) at replicas 0, under back pressure, or for a
    source the run is closing, or a vertex it holds (a reduce whose state it moves). In an output
    other vertices write too (a join's input), what the batch may write is claimed in the same
    transaction as the room is read, so no other writer plans on the same room; the claim stands
    until this vertex's next admission (its batch has landed by then)."""
    control = stores.control(config)
    replicas = admissible(control, config.vertex)
    shared = [
        name
        for name, discards, others in zip(config.outputs, config.discard, config.shared, strict=True)
        if others and not discards
    ]
    closing = config.source is not None and control.closing(config.vertex)  # a source it stops
    if replicas <= 0 or closing or control.holding(config.vertex):  # held: a reduce being moved
        if shared:
            with control.claiming() as claims:
                claims.claim(shared, config.vertex, 0)
        return Admission(start, replicas)
    if config.side_inputs and side_inputs.store(config.run_dir).current(config.side_inputs) is None:
        return Admission(start, replicas)  # a side input has no value yet: wait, as Numaflow's vertices do
    # A live edit of the pipeline's readBatchSize may change it, unless the vertex sets its own.
    size = (
        config.read_batch_size if config.own_batch_size else control.read_batch_size(config.read_batch_size)
    )
    take = replicas * size
    if not shared:
        end, held = _take(config, start, available, take, output_room(config), replicas)
    else:
        expansion = control.expansion(config.vertex)
        for name in config.outputs:  # opened (a store's first open writes its tables) before
            stores.buffer(config, name)  # the claims' transaction holds the file's write lock
        with control.claiming() as claims:
            room = output_room(config, expansion, claims)
            end, held = _take(config, start, available, take, room, replicas)
            claims.claim(shared, config.vertex, math.ceil((end - start) * expansion))
    if held:
        _held_back(config, time.time())
    return Admission(end, replicas)


def admissible(control: ControlStore, vertex: str) -> int:
    """The replicas the vertex's next micro-batch is admitted for: the controller's count, no
    more than the slots it has (:func:`~tidal.scaling.executors.slotted`)."""
    return slotted(control.replicas(vertex, default=1), control.slots(vertex))


def _take(
    config: QueryConfig, start: int, available: int, take: int, room: int | None, replicas: int
) -> tuple[int, bool]:
    """The batch's end: ``take`` messages past ``start``, no more than the outputs' ``room``,
    what is ``available`` and the rate limit allows; and whether the limit held it back."""
    if room is not None:
        take = min(take, room)
    limit = config.rate_limit
    if limit is None or take <= 0:
        return min(available, start + take), False
    throttle = _throttle(config)
    pool = replicas if limit.store == "perReplica" else 1
    now = time.time()
    allowed = throttle.acquire(now, take, pool)
    end = min(available, start + allowed)
    throttle.give_back(now, allowed - (end - start), pool)
    return end, allowed < min(take, available - start)


_MARKED: dict[tuple[str, str], float] = {}


def _held_back(config: QueryConfig, now: float) -> None:
    """Tell the controller the limit, not the replicas, bounds this vertex (at most once a second:
    under ``durability: sync`` each mark is a synced write)."""
    key = (config.run_dir, config.vertex)
    if now - _MARKED.get(key, 0.0) >= 1.0:
        _MARKED[key] = now
        stores.control(config).mark_throttled(config.vertex, now)


_THROTTLES: dict[tuple[str, str], Throttle] = {}


def _throttle(config: QueryConfig) -> Throttle:
    """The vertex's budget, kept in the process that plans its batches (one per run and vertex)."""
    key = (config.run_dir, config.vertex)
    limit = config.rate_limit
    assert limit is not None
    throttle = _THROTTLES.get(key)
    if throttle is None or throttle.spec != limit.limit:
        throttle = _THROTTLES[key] = Throttle(limit.limit)
    return throttle


def partition_batch(config: QueryConfig, first: int, last: int, replicas: int | None) -> list[Range]:
    """The partitions of the micro-batch ``first..last``, recorded as the vertex's current batch
    (its writer's commit trims and counts by it): ``replicas`` ranges (the count that admitted
    the batch), or, when this batch was split before (a replay after a crash), the same ranges
    as then. ``replicas`` None (a batch Spark planned before this reader existed) reads the
    control record once."""
    control = stores.control(config)
    recorded = control.batch_range(config.vertex)
    if recorded is not None and (recorded.first, recorded.last) == (first, last) and recorded.parts:
        return [Range(a, b, i) for i, (a, b) in enumerate(recorded.parts)]
    if replicas is None:
        replicas = admissible(control, config.vertex)
    ranges = split(first, last, replicas)
    control.set_batch_range(config.vertex, first, last, [(r.first, r.last) for r in ranges])
    return ranges


def task_row(partition: Range) -> Any:
    """The one row a partition hands Spark: the input range its writer task reads."""
    import pyarrow as pa

    freeze_imports()  # every reader's task comes here, in a worker PySpark keeps for the next
    side_inputs.arrive(partition)  # before the writer task reads this row and runs the handler
    return pa.RecordBatch.from_arrays(
        [
            pa.array([partition.first], pa.int64()),
            pa.array([partition.last], pa.int64()),
            pa.array([partition.index], pa.int32()),
            pa.array([-1], pa.int32()),
            pa.array([partition.t0], pa.float64()),
        ],
        names=["first", "last", "part", "kpart", "t0"],
    )
