"""Side-input values for a reduce vertex's handler: relayed through the pipeline's buffer backend.

A map or sink handler runs in the task whose partition carried the values
(:mod:`tidal.spark.batch.side_inputs`). A reduce vertex's handler does not: it runs after Spark's
shuffle, in a task of the aggregation's output (the :class:`~tidal.spark.query.reduce.ReduceWriter`)
or in ``applyInPandasWithState``'s function (:mod:`tidal.spark.query.accumulator`), and Spark
may put that task on an executor where no reader task of the batch ran, so no partition brought
the values to its host. A column carrying the values through the shuffle would repeat them on
every row; the writer's closure is pickled when the query starts, so a value in it would need a
restart to change.

**Relayed.** The values go where every executor already reaches: the pipeline's buffer backend
(the SQLite file on one host, the JetStream servers on a cluster). The driver's manager
(:mod:`tidal.spark.run.side_inputs`) appends a snapshot of every current value to the buffer
:data:`RELAY_BUFFER` (one message per side input, id ``<name>@<version>``, its bytes the
payload) **before** it stores the value in the run directory, and trims the snapshots before the
newest. So a batch planned with a version (the readers take it from the run directory, and hold
a batch back until every value exists) finds that version, or a newer one, in the relay.

**Fetched in the task.** Before a reduce handler runs, the task reads the relay once
(:func:`arrive`; once per task: an accumulator's function is called per key) and writes each
value into its host's directory through :func:`~tidal.spark.batch.side_inputs.materialise`: an
atomic rename, and only over an older version, so a task planned earlier never puts an older
value back. A new value is seen from the next micro-batch, without a query restart.

The buffer's name has capitals and ``_``, which no vertex name has (a DNS label), so it is no
vertex's buffer, also as a JetStream stream name (``-`` becomes ``_`` there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tidal import errors
from tidal.isb.base import Buffer, BufferLimits, BufferStore
from tidal.scaling.side_inputs import SideInputValue
from tidal.spark.batch import side_inputs, stores

if TYPE_CHECKING:
    from tidal.spark.batch.config import QueryConfig
    from tidal.spec.model import PipelineSpec

__all__ = ["RELAY_BUFFER", "SideInputRelay", "arrive", "fetch", "relayed"]

RELAY_BUFFER = "Side_Inputs"
_LIMITS = BufferLimits(max_length=100_000)  # snapshots before the newest are trimmed at each


def relayed(spec: PipelineSpec) -> bool:
    """Whether a vertex of ``spec`` runs its handler after a shuffle and reads side inputs (a
    reduce vertex naming some): only then does the driver relay the values."""
    return any(v.side_inputs and v.udf is not None and v.udf.reduce is not None for v in spec.vertices)


class SideInputRelay:
    """The driver's half: each new set of values appended to the relay buffer."""

    def __init__(self, store: BufferStore) -> None:
        self.buffer: Buffer = store.create(RELAY_BUFFER, _LIMITS)

    def publish(self, values: Mapping[str, SideInputValue]) -> None:
        """Append ``values`` (every side input's current one) as a snapshot, then trim the older
        snapshots. A snapshot already appended (a restart publishes what it has) is skipped by
        its key, which names each value's version and when the retriever gave it (so a new run
        on an old run's JetStream streams does not find its first values already there)."""
        if not values:
            return
        names = sorted(values)
        key = "snapshot:" + ",".join(f"{n}@{values[n].version}/{values[n].at!r}" for n in names)
        self.buffer.append_batch(
            key,
            [f"{n}@{values[n].version}" for n in names],
            [values[n].value for n in names],
            [values[n].at for n in names],
        )
        # Versions only grow, so the newest snapshot is the last one appended: keep it alone.
        behind = self.buffer.last_seq() - len(names)
        if behind > self.buffer.committed():
            self.buffer.commit(behind)


def latest(buffer: Buffer) -> dict[str, tuple[int, bytes]]:
    """Each side input's value in the newest snapshot the relay holds: ``name → (version, bytes)``.

    The last one appended wins, not the highest version: a run started afresh on an old run's
    streams counts its versions from 1 again. A read that races the driver's trim loses only
    older snapshots: the newest is never trimmed, and an append is whole or absent."""
    first, last = buffer.committed() + 1, buffer.last_seq()
    found: dict[str, tuple[int, bytes]] = {}
    if last < first:
        return found
    batch = buffer.read_batch(first, last)
    for message_id, payload in zip(
        batch.column("id").to_pylist(), batch.column("payload").to_pylist(), strict=True
    ):
        name, _, version = str(message_id).rpartition("@")
        found[name] = (int(version), bytes(payload))  # in sequence order: the newest last
    return found


def fetch(config: QueryConfig) -> side_inputs.Carried | None:
    """The current values of the query's side inputs, as the relay holds them (None while one
    has none: the driver has not published it)."""
    try:
        buffer = stores.buffer(config, RELAY_BUFFER)
    except errors.BufferNotFound:
        return None
    found = latest(buffer)
    if any(n not in found for n in config.side_inputs):
        return None
    values = tuple((n, found[n][0], found[n][1]) for n in config.side_inputs)
    return side_inputs.Carried(side_inputs.host_key(config.run_dir, config.run_id), values)


_ARRIVED: dict[str, tuple[int, int, int]] = {}  # run dir → the task that last fetched, per process


def arrive(config: QueryConfig) -> None:
    """In a reduce's task, before its handler runs (and before the handler's module is imported:
    :func:`~tidal.spark.batch.side_inputs.point_pynumaflow`): the relay's values written on this
    host, once per task. Raises when a value is missing, naming the side inputs."""
    from pyspark import TaskContext

    side_inputs.point_pynumaflow(config.run_dir, config.run_id)
    context = TaskContext.get()
    task = (context.stageId(), context.partitionId(), context.attemptNumber()) if context else None
    if task is not None and _ARRIVED.get(config.run_dir) == task:
        return
    side = fetch(config)
    if side is None:
        raise RuntimeError(
            f"vertex {config.vertex}: side input(s) {', '.join(config.side_inputs)} have no value in "
            f"the buffer {RELAY_BUFFER!r}, which the driver fills before it stores a value (and at "
            "start): see the driver's log for a relay that failed (tidal.side_inputs)"
        )
    side_inputs.materialise(side)
    if task is not None:
        _ARRIVED[config.run_dir] = task
