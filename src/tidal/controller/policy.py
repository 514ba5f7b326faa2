"""Scaling policies: what the controller asks once per vertex per tick.

The controller gathers the inputs (a :class:`PolicyInput`) and applies the output (a
:class:`~tidal.scaling.Decision`); a :class:`VertexPolicy` sits in between. Tidal's own policies
are adapters over :mod:`tidal.scaling`, so the Spark runtime, dry runs and the simulator all run
the one decision code:

* :class:`NumaflowPolicy` — the default: the activator for a vertex at zero
  (:func:`~tidal.scaling.wake_from_zero`), then Numaflow's rules (:func:`~tidal.scaling.decide`).
  When a vertex wakes on pending, the controller also wakes the vertices at zero downstream of
  it through :meth:`NumaflowPolicy.wake_for_path` (:func:`~tidal.scaling.wake_on_path`).
* :class:`KpaPolicy` — Knative's KPA on the vertex's *arrival rate* (``metric: rps``). A stream
  vertex has no requests; messages arriving at its input are the closest thing, and they are
  measured while the vertex is at zero too, as Knative's activator measures requests it holds.
  The per-replica target has to be given (Knative's ``target``); Numaflow's policy needs none.

Other policies (the peers :mod:`tidal.sim` compares against) implement the same protocol.
A policy keeps whatever state it needs between ticks; it is called on every tick on which
its vertex could be sampled, with ``now`` increasing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tidal.scaling import (
    BufferInfo,
    Decision,
    KpaMetric,
    KpaScaler,
    KpaSpec,
    NumaflowScale,
    PartitionMetrics,
    PressureCheck,
    VertexKind,
    VertexObservation,
    decide,
    wake_from_zero,
    wake_on_path,
)
from tidal.scaling.executors import slotted
from tidal.scaling.sink_health import SinkHealth
from tidal.scaling.throttle import THROTTLED_RECENTLY

__all__ = ["KpaPolicy", "NumaflowPolicy", "PolicyInput", "VertexPolicy"]


@dataclass(frozen=True, slots=True)
class PolicyInput:
    """One vertex at one tick, as every policy sees it.

    ``processed``, ``busy_seconds`` and ``upstream_arrived`` are cumulative counters; ``arrived`` is
    ``processed + pending_now``, the cumulative count of messages that reached the vertex (the
    demand, whatever the vertex managed). ``rate`` and ``pending`` are Numaflow's lookback
    averages. ``busy_seconds`` (replica-seconds spent working) is ``None`` where the runtime
    cannot measure it.
    """

    name: str
    kind: VertexKind
    now: float
    replicas: int
    ready: int
    processed: float
    pending_now: float | None
    busy_seconds: float | None
    rate: float | None
    pending: float | None
    last_scaled_at: float
    pressure: PressureCheck
    started_at: float  # the controller's first tick for this vertex
    buffer_max_length: int
    buffer_usage_limit: float
    read_batch_size: int
    # What is heading this way: the pending of every vertex upstream, and the messages that have
    # arrived at the sources upstream (cumulative; None for a source or when unknown).
    upstream_pending: float = 0.0
    upstream_arrived: float | None = None
    # How old ``arrived`` and ``upstream_arrived`` are, in seconds: a source's count is as of its
    # reader's last report (tidal.controller.ports.ProbeSample.age), and rates span those times.
    arrived_age: float = 0.0
    upstream_age: float = 0.0
    # The most the vertices feeding this one can deliver a second: each one's ``scale.max`` ×
    # what its policy learnt a replica sustains (None: a source, or a feeder whose policy does
    # not learn it). Downstream of a bottleneck, what is pending upstream comes no faster.
    upstream_limit: float | None = None
    sink_retried: float | None = None  # cumulative message writes its sink retried (None: unknown)
    # The most messages/s its shared rate limit lets through now, on its ramp (None: no limit, or
    # one per replica, which grows with them): tidal.scaling.throttle.ceiling.
    rate_limit: float | None = None
    throttled_at: float | None = None  # when its rate limit last held a micro-batch back
    tasks: float | None = None  # cumulative tasks its micro-batches ran (None: not counted)
    # The most replicas the cluster can run for it (its share of maxExecutors × executorCores;
    # None: no such limit known): more asked for are never ready, and are not waited for.
    attainable: int | None = None

    @property
    def ready_for(self) -> int:
        """The replicas that can ever be ready of those asked for: ``replicas``, no more than
        :attr:`attainable` (but one, as admission runs one: :func:`~tidal.scaling.executors.slotted`)."""
        return slotted(self.replicas, self.attainable)

    @property
    def arrived(self) -> float | None:
        return None if self.pending_now is None else self.processed + self.pending_now


class VertexPolicy(Protocol):
    """Decides one vertex's replicas; ``name`` labels it in benchmarks and plots.

    ``wake_for_path`` is asked when a vertex upstream woke from zero on pending (the controller's
    path wake-up): a decision to wake now, or ``None`` to wait for the messages.
    ``most_delivered`` bounds what the vertices downstream size for. A policy that subclasses
    this Protocol inherits "wait" and "unknown" (``None`` for both); one that only matches it
    must define both.
    """

    name: str

    def decide(self, view: PolicyInput) -> Decision: ...

    def wake_for_path(self, view: PolicyInput, woken: str) -> Decision | None:
        """Wake at once because ``woken``, upstream, just woke? ``None``: wait for messages."""
        return None

    def most_delivered(self) -> float | None:
        """Messages/s this vertex delivers at most, where the policy learnt it (the controller
        passes it downstream as ``PolicyInput.upstream_limit``); ``None``: it does not know."""
        return None


class NumaflowPolicy(VertexPolicy):
    """Numaflow's autoscaler with Tidal's activator: the default policy of every vertex."""

    name = "numaflow"

    def __init__(self, scale: NumaflowScale) -> None:
        self.scale = scale
        self.sink = SinkHealth()

    def decide(self, view: PolicyInput) -> Decision:
        self.sink.record(view.now, view.processed, view.sink_retried)
        failing = self.sink.retried_share(view.now, self.scale.lookback_seconds)
        obs = self._observation(view, failing)
        woken = wake_from_zero(self.scale, obs, view.now)
        if woken is not None:
            return woken
        return decide(self.scale, obs, view.now, view.pressure)

    def wake_for_path(self, view: PolicyInput, woken: str) -> Decision | None:
        """Wake at once because ``woken`` upstream just woke (see :func:`~tidal.scaling.wake_on_path`)."""
        return wake_on_path(self.scale, self._observation(view), view.now, woken)

    @staticmethod
    def _observation(view: PolicyInput, sink_failing: float | None = None) -> VertexObservation:
        buffers: tuple[BufferInfo, ...] = ()
        if not view.kind.reads_source:
            now_pending = int(view.pending_now) if view.pending_now is not None else 0
            buffers = (BufferInfo(view.name, view.buffer_max_length, view.buffer_usage_limit, now_pending),)
        return VertexObservation(
            view.name,
            view.kind,
            replicas=view.replicas,
            ready_replicas=view.ready,
            last_scaled_at=view.last_scaled_at,
            partitions=(PartitionMetrics(view.name, view.rate, view.pending),),
            buffers=buffers,
            read_batch_size=view.read_batch_size,
            started_at=view.started_at,
            sink_retried_share=sink_failing,
            throttled=view.throttled_at is not None and view.now - view.throttled_at <= THROTTLED_RECENTLY,
            # decide() counts a source's limit in reads of readBatchSize (Numaflow's unit)
            rate_limit_max=None
            if view.rate_limit is None
            else view.rate_limit / (view.read_batch_size if view.kind.reads_source else 1),
        )


class KpaPolicy(VertexPolicy):
    """Knative's KPA (stable/panic windows, rate limits, scale-to-zero gate) on arrivals/s.

    Each tick records the messages that arrived since the previous tick, divided by the time
    between them, as the revision-wide requests per second; ``spec.target`` is the
    messages/s one replica should take (before ``targetUtilization``). Messages that arrive
    while the vertex is at zero are counted too (Knative's activator reports the requests it
    holds), which is what wakes it. It does not wake on the path (Knative's activator serves one
    revision; the KPA wakes on the arrivals it sees).
    """

    name = "kpa"

    def __init__(self, spec: KpaSpec, vertex: str, now: float, ready: int = 0) -> None:
        if spec.metric != KpaMetric.RPS or spec.target is None:
            raise ValueError("KpaPolicy needs metric=rps and a per-replica target (messages/s)")
        self.scaler = KpaScaler(vertex, spec, now, ready)
        self._last: tuple[float, float] | None = None  # (now, arrived)

    def decide(self, view: PolicyInput) -> Decision:
        arrived = view.arrived
        if arrived is not None:
            if self._last is not None and view.now > self._last[0]:
                per_second = max(0.0, arrived - self._last[1]) / (view.now - self._last[0])
                self.scaler.record(view.now, per_second)
            self._last = (view.now, arrived)
        return self.scaler.decide(view.now, view.ready, view.replicas)
