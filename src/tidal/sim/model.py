"""A simulated pipeline: the same spec, replicas with a capacity and a start-up delay, bounded
buffers with back pressure, and a virtual clock.

:class:`SimPipeline` is what the real :class:`~tidal.controller.Controller` talks to in a
simulation: it is the controller's :class:`~tidal.controller.Probe` (processed counts, pending,
replicas, ready replicas, busy time) and its :class:`~tidal.controller.Actuator` (set
replicas). The decision code is the runtime's own; only the pipeline is simulated.

The model, per step of ``dt`` seconds (1 s by default), vertices in topological order:

* Messages arrive at a source's **backlog** (the outside world: a topic), unbounded.
* A vertex with ``r`` *ready* replicas can process ``r × sustained × dt`` messages, limited by
  what its input holds and by the free room in **every** output buffer: a buffer accepts
  writes up to ``bufferMaxLength × bufferUsageLimit`` (Numaflow's "full"), and a vertex whose
  downstream is full processes nothing more (back pressure, ``onFull: retryUntilSuccess``).
* Each vertex emits one message per message read (a map), to every output (fan-out copies).
  Every vertex has one input buffer, whatever number of edges lead into it (Tidal's ISB).
* **Micro-batches.** A replica works in micro-batches of at most ``readBatchSize`` messages
  (admission's cap), and each batch pays ``batch_seconds`` of fixed cost besides the work
  (offset log, planning, commit: 0.23–0.27 s measured on the wave pipeline's saturated
  batches). So what a replica *sustains* is ``B / (batch_seconds + B / capacity)``, below its
  ``capacity``: 1333/s for a 4000/s source at ``B = 500``, 222/s for a 250/s map. The fixed
  cost is outside the tasks, so busy time does not see it, as on Spark.
* A sink's output leaves the pipeline; each message's **end-to-end delay** is the end of the
  step that delivered it minus the start of the second it arrived in (so the floor is ``dt``).
* **A refusing sink** (``VertexModel.refused``: from, to, accepted/s): in that window the system
  behind the sink accepts at most that many messages a second, whatever the replicas send, and
  refuses the rest, which are written again (``sink.retryStrategy``): the vertex counts the
  retried writes (what the runtime's routed sink reports). More replicas send more writes to
  refuse, and deliver no more. **A rate limit** (the spec's ``limits.rateLimit``) caps what the vertex
  reads with the runtime's own throttle (:mod:`tidal.scaling.throttle`), which says when it held
  the vertex back.
* A new replica does work ``startup_seconds`` after it was asked for (Spark measured about 8 s
  for a cold executor); scaling down removes replicas still starting first, at once.
* **Busy time** is processed ÷ capacity, in replica-seconds, with ±``busy_noise`` (10 %) of
  seeded measurement noise per step: what DS2/Flink and Tidal's policy read. The runtime's busy
  time is the tasks' wall time, never exact; a noise-free one would flatter the policies that
  read it.

Counts are whole messages, with a per-vertex remainder carried between steps, so
``arrived = delivered + in backlogs and buffers`` holds exactly (see ``conservation``).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from tidal.controller import ProbeSample
from tidal.scaling.throttle import Throttle
from tidal.spec import PipelineSpec, graph

__all__ = ["DEFAULT_BATCH_SECONDS", "SimPipeline", "VertexModel", "chained", "default_models"]


# Seconds a micro-batch costs besides its tasks' work (offset log, planning, commit): 0.23-0.27 s
# on the wave pipeline's saturated batches (orders, archive) on the 2-core box, 2026-11-23.
DEFAULT_BATCH_SECONDS = 0.25


@dataclass(frozen=True)
class VertexModel:
    """What one replica of a vertex can do."""

    capacity: float  # messages/s per ready replica, while its tasks work (what busy time sees)
    startup_seconds: float = 8.0
    busy_noise: float = 0.1  # busy time is measured within ± this fraction
    batch_seconds: float = DEFAULT_BATCH_SECONDS  # fixed cost of a micro-batch, outside the tasks
    refused: tuple[float, float, float] | None = None  # (from s, to s, messages/s accepted then)

    def sustained(self, read_batch_size: int) -> float:
        """Messages/s one replica keeps up with: micro-batches of ``read_batch_size``, each
        paying ``batch_seconds`` besides the work. What a replica can really do."""
        return read_batch_size / (self.batch_seconds + read_batch_size / self.capacity)

    def __post_init__(self) -> None:
        if not self.capacity > 0:
            raise ValueError(f"capacity must be > 0 messages/s per replica, got {self.capacity}")
        if self.startup_seconds < 0:
            raise ValueError(f"startup_seconds must be >= 0, got {self.startup_seconds}")
        if self.batch_seconds < 0:
            raise ValueError(f"batch_seconds must be >= 0, got {self.batch_seconds}")


# A MonoVertex's replica reads, transforms and writes: the transformer (a UDF's 250/s) bounds it.
DEFAULT_CAPACITY = {"source": 4000.0, "udf": 250.0, "sink": 4000.0, "monovertex": 250.0}


def default_models(
    spec: PipelineSpec, overrides: Mapping[str, VertexModel] | None = None, startup_seconds: float = 8.0
) -> dict[str, VertexModel]:
    """A model per vertex: ``DEFAULT_CAPACITY`` by kind unless ``overrides`` names the vertex."""
    overrides = overrides or {}
    unknown = set(overrides) - {v.name for v in spec.vertices}
    if unknown:
        raise ValueError(f"models for vertices not in the pipeline: {sorted(unknown)}")
    return {
        v.name: overrides.get(v.name) or VertexModel(DEFAULT_CAPACITY[v.kind], startup_seconds)
        for v in spec.vertices
    }


def chained(
    spec: PipelineSpec, models: Mapping[str, VertexModel]
) -> tuple[PipelineSpec, dict[str, VertexModel]]:
    """``spec`` as it runs chained (:mod:`tidal.spec.chains`), and a model per chain: what the
    runtime does with it. A chain's replica is one task that runs every member on each message in
    turn, so it works at ``1 / Σ 1/capacity`` of its members and pays one micro-batch's fixed cost
    (the head's) instead of one per member; it starts when its slowest member would."""
    from tidal.spec.chains import folded, plan_chains

    plan = plan_chains(spec)
    out = {}
    for chain in plan.chains:
        members = [models[m] for m in chain.members]
        head = members[0]
        out[chain.head] = VertexModel(
            capacity=1.0 / sum(1.0 / m.capacity for m in members),
            startup_seconds=max(m.startup_seconds for m in members),
            busy_noise=head.busy_noise,
            batch_seconds=head.batch_seconds,
        )
    return folded(spec, plan), out


class _Queue:
    """A FIFO of cohorts ``[arrival second, count]``: enough to know every message's age."""

    __slots__ = ("cohorts", "length")

    def __init__(self) -> None:
        self.cohorts: deque[list[float]] = deque()
        self.length = 0

    def push(self, born: float, count: int) -> None:
        if count <= 0:
            return
        if self.cohorts and self.cohorts[-1][0] == born:
            self.cohorts[-1][1] += count
        else:
            self.cohorts.append([born, count])
        self.length += count

    def take(self, count: int) -> list[tuple[float, int]]:
        out = []
        while count > 0 and self.cohorts:
            head = self.cohorts[0]
            n = min(count, int(head[1]))
            out.append((head[0], n))
            head[1] -= n
            count -= n
            self.length -= n
            if head[1] == 0:
                self.cohorts.popleft()
        return out


@dataclass
class _Vertex:
    name: str
    kind: str
    model: VertexModel
    inputs: _Queue = field(default_factory=_Queue)
    outputs: list[str] = field(default_factory=list)
    ready_at: list[float] = field(default_factory=list)  # one per allocated replica
    processed: int = 0
    busy: float = 0.0
    carry: float = 0.0
    worked_at: float | None = None  # the start of the last step in which it processed messages
    worked_with: int = 0  # the replicas that worked in that step
    changed_at: float = -math.inf  # when its replica count was last set
    retried: float = 0.0  # writes its sink refused and wrote again
    throttle: Throttle | None = None  # its rate limit's, if it has one
    throttled_at: float | None = None  # when its rate limit last held it back

    def ready(self, now: float) -> int:
        return sum(1 for at in self.ready_at if at <= now)

    def seen_ready(self) -> int:
        """The ready replicas as the runtime reports them (``ControlStore.ready_replicas``): all
        of them once a micro-batch since the count was set ran on that many, else as many as
        the last micro-batch that read messages ran on. Seeing a replica needs messages: one
        that came up after the vertex's messages ran out stays "starting" until the next ones.
        Woken from 0, the replicas the last micro-batch ran on count at once (a Numaflow peek
        must see its replica ready without messages). Before any work, all count as ready."""
        replicas = len(self.ready_at)
        if self.worked_at is None or (self.worked_at >= self.changed_at and self.worked_with >= replicas):
            return replicas
        return min(replicas, self.worked_with)


class SimPipeline:
    """The simulated pipeline; the controller's probe and actuator. Time only moves in ``step``."""

    def __init__(
        self,
        spec: PipelineSpec,
        models: Mapping[str, VertexModel],
        initial: Mapping[str, int] | None = None,
        dt: float = 1.0,
        cores: int | None = None,
    ) -> None:
        missing = {v.name for v in spec.vertices} - set(models)
        if missing:
            raise ValueError(f"no model for vertices {sorted(missing)}")
        if dt <= 0:
            raise ValueError(f"dt must be > 0 seconds, got {dt}")
        self.spec = spec
        self.dt = dt
        # Spark local mode: every vertex's tasks share ``cores`` task slots, so replicas beyond
        # them add no capacity (None: a cluster whose replicas each bring their own core).
        self.cores = cores
        self._noise = random.Random(0)  # seeded: the same simulation measures the same busy time
        self.now = 0.0
        limits = spec.limits
        self.room = int(limits.buffer_max_length * limits.buffer_usage_limit)
        self.read_batch_size = limits.read_batch_size
        self.vertices: dict[str, _Vertex] = {}
        for v in graph.topological(spec):
            replicas = (initial or {}).get(v.name, 1)
            self.vertices[v.name] = _Vertex(v.name, v.kind, models[v.name], ready_at=[0.0] * replicas)
            limit = spec.rate_limit(v.name)
            if limit is not None:
                self.vertices[v.name].throttle = Throttle(limit.limit)
        for e in spec.edges:
            self.vertices[e.from_].outputs.append(e.to)
        self.sources = [v for v in self.vertices.values() if v.kind in ("source", "monovertex")]
        self.arrived = 0  # messages offered to the pipeline (per source, summed)
        self.delivered: dict[str, int] = {
            v.name: 0 for v in self.vertices.values() if v.kind in ("sink", "monovertex")
        }
        self.delays: dict[float, int] = {}  # end-to-end delay (s) → messages, at every sink
        self.first_delivery: dict[float, float] = {}  # arrival second → when its first message left

    # -- Probe and Actuator ------------------------------------------------------------------

    def sample(self, vertex: str) -> ProbeSample:
        v = self.vertices[vertex]
        return ProbeSample(
            processed=float(v.processed),
            pending=float(v.inputs.length),
            replicas=len(v.ready_at),
            ready=v.seen_ready(),
            busy_seconds=v.busy,
            sink_retried=v.retried,
            throttled_at=v.throttled_at,
        )

    def set_replicas(self, vertex: str, replicas: int) -> None:
        v = self.vertices[vertex]
        have = len(v.ready_at)
        if replicas != have:
            v.changed_at = self.now
        if replicas > have:
            v.ready_at.extend([self.now + v.model.startup_seconds] * (replicas - have))
        elif replicas < have:
            v.ready_at.sort()  # the latest to become ready go first
            del v.ready_at[replicas:]

    # -- time --------------------------------------------------------------------------------

    def step(self, arrivals: int) -> None:
        """Advance one ``dt``: ``arrivals`` messages reach every source, then every vertex works."""
        born = self.now
        for source in self.sources:
            source.inputs.push(born, arrivals)
            self.arrived += arrivals
        end = self.now + self.dt
        share = 1.0
        if self.cores is not None:
            wanting = sum(v.ready(self.now) for v in self.vertices.values() if v.inputs.length)
            share = min(1.0, self.cores / wanting) if wanting else 1.0
        for v in self.vertices.values():
            self._work(v, end, share)
        self.now = end

    def _work(self, v: _Vertex, end: float, share: float = 1.0) -> None:
        ready = v.ready(self.now)
        budget = ready * v.model.sustained(self.read_batch_size) * self.dt * share + v.carry
        can = math.floor(budget + 1e-9)
        limit = min(can, v.inputs.length)
        for out in v.outputs:
            limit = min(limit, self.room - self.vertices[out].inputs.length)
        if v.throttle is not None and limit > 0:
            allowed = v.throttle.acquire(self.now, limit)
            if allowed < limit:
                v.throttled_at, limit = self.now, allowed
        n = max(0, limit)
        refused = v.model.refused
        if refused is not None and refused[0] <= self.now < refused[1] and n > refused[2] * self.dt:
            accepted = math.floor(refused[2] * self.dt)
            v.retried += n - accepted  # sent, refused, and sent again later
            n = accepted
        # The remainder carries over only while the replicas are saturated: idle capacity is lost.
        v.carry = budget - n if n == can else 0.0
        if n == 0:
            return
        v.worked_at, v.worked_with = self.now, ready
        taken = v.inputs.take(n)
        v.processed += n
        noise = v.model.busy_noise
        v.busy += n / v.model.capacity * (1 + (self._noise.uniform(-noise, noise) if noise else 0.0))
        if v.outputs:
            for out in v.outputs:
                queue = self.vertices[out].inputs
                for born, count in taken:
                    queue.push(born, count)
        else:
            self.delivered[v.name] += n
            for born, count in taken:
                delay = round(end - born, 6)
                self.delays[delay] = self.delays.get(delay, 0) + count
                self.first_delivery.setdefault(born, end)

    # -- accounting ----------------------------------------------------------------------------

    def in_flight(self, sink: str) -> int:
        """Messages bound for ``sink`` still in a backlog or buffer on the way to it."""
        upstream = {sink}
        changed = True
        while changed:
            changed = False
            for e in self.spec.edges:
                if e.to in upstream and e.from_ not in upstream:
                    upstream.add(e.from_)
                    changed = True
        return sum(self.vertices[name].inputs.length for name in upstream)

    def conservation(self) -> dict[str, tuple[int, int, int]]:
        """Per sink: ``(arrived, delivered, in flight)``; arrived = delivered + in flight, on every
        path through the pipeline (with one source; fan-out copies each message to each sink)."""
        per_source = self.arrived // max(1, len(self.sources))
        return {sink: (per_source, n, self.in_flight(sink)) for sink, n in self.delivered.items()}
