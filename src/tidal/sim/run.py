"""Run one trace through one policy: the real controller ticking a simulated pipeline.

``simulate(spec, trace, policy)`` builds a :class:`~tidal.sim.model.SimPipeline`, hands it to
:class:`~tidal.controller.Controller` as probe and actuator with the chosen policy for every
vertex, and steps one second at a time: messages arrive, the vertices work, and every
``controller.intervalSeconds`` the controller ticks at the simulated time. Everything is
recorded per second in a :class:`SimResult`; :mod:`tidal.sim.scores` turns it into scores.

Policies (``POLICIES``): Tidal's ``tidal`` (the default, :data:`~tidal.spec.DEFAULT_POLICY`),
``numaflow`` (with its activator) and ``kpa``,
the peers of :mod:`tidal.sim.peers`: ``static-peak``, ``ds2``, ``spark-da``, and ``flink``, the
Flink operator's autoscaler as ``policy: flink`` runs it (:mod:`tidal.controller.flink`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tidal.controller import Controller, KpaPolicy, VertexPolicy
from tidal.controller.choose import adaptive_policy, flink_policies
from tidal.scaling import Decision, KpaMetric, KpaSpec
from tidal.scaling.flink import FlinkOptions
from tidal.sim.model import SimPipeline, VertexModel, default_models
from tidal.sim.peers import Ds2Policy, SparkDynamicAllocationPolicy, StaticPeakPolicy
from tidal.sim.traces import Trace
from tidal.spec import DEFAULT_POLICY, Pipeline, PipelineSpec, graph, numaflow_scale

__all__ = [
    "POLICIES",
    "TUNABLE",
    "SimResult",
    "demand",
    "make_policies",
    "oracle",
    "reference_pipeline",
    "simulate",
]

POLICIES = ("tidal", "numaflow", "kpa", "static-peak", "ds2", "flink", "spark-da")
# The peers whose own knobs a run can set (``tuning``), and the knobs.
TUNABLE = {
    "ds2": frozenset({"target_utilization", "boundary", "window_seconds", "stabilization_seconds",
                      "catch_up_seconds", "scale_down_max_factor"}),
    "flink": frozenset(f.name for f in dataclasses.fields(FlinkOptions)),
}  # fmt: skip


def reference_pipeline() -> PipelineSpec:
    """The benchmark's pipeline: ``in`` (source) → ``work`` (a map) → ``out`` (sink), defaults
    everywhere. With the default models, ``work`` (250 messages/s per replica) is the
    bottleneck and ``in``/``out`` (4000/s) need one or two replicas."""
    return (
        Pipeline("reference")
        .source("in", generator={"rate": 1})
        .map("work", "tidal.examples.udfs:upper")
        .sink("out", "blackhole")
        .build()
    )


@dataclass
class SimResult:
    """Everything one simulation recorded, one entry per simulated second (at its end)."""

    trace: Trace
    policy: str
    spec: PipelineSpec
    models: dict[str, VertexModel]
    times: list[float] = field(default_factory=list)
    replicas: dict[str, list[int]] = field(default_factory=dict)  # allocated (starting + ready)
    ready: dict[str, list[int]] = field(default_factory=dict)
    pending: dict[str, list[int]] = field(default_factory=dict)
    delivered: list[int] = field(default_factory=list)  # per second, all sinks
    ticks: list[float] = field(default_factory=list)  # when the controller decided
    changes: list[Decision] = field(default_factory=list)
    delays: dict[float, int] = field(default_factory=dict)  # delivered: delay (s) → messages
    undelivered: list[tuple[float, int]] = field(default_factory=list)  # still in flight at the end
    first_delivery: dict[float, float] = field(default_factory=dict)  # arrival second → first out
    empty_at_zero: list[float] = field(default_factory=list)  # arrivals into an empty pipeline at 0
    conservation: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    demand: dict[str, list[float]] = field(default_factory=dict)  # offered messages/s per vertex
    oracle: dict[str, list[int]] = field(default_factory=dict)
    retried: dict[str, float] = field(default_factory=dict)  # writes a refusing sink had sent again

    @property
    def bottleneck(self) -> str:
        """The vertex the trace needs the most replicas of (ties: the first in the spec)."""
        return max(self.oracle, key=lambda v: (max(self.oracle[v], default=0), -list(self.oracle).index(v)))


class _Recorder:
    """The controller's decision sink in a simulation: keeps the changes, in memory."""

    def __init__(self, into: list[Decision]) -> None:
        self.into = into

    def record(self, decision: Decision) -> bool:
        if decision.changed:
            self.into.append(decision)
            return True
        return False


def demand(spec: PipelineSpec, rates: list[float] | tuple[float, ...]) -> dict[str, list[float]]:
    """Messages/s offered to each vertex: the trace at every source, summed along the edges
    (each vertex emits one message per message read, copied to each output)."""
    out: dict[str, list[float]] = {}
    incoming: dict[str, list[str]] = {v.name: [] for v in spec.vertices}
    for e in spec.edges:
        incoming[e.to].append(e.from_)
    for v in graph.topological(spec):
        ups = incoming[v.name]
        out[v.name] = [sum(vals) for vals in zip(*(out[u] for u in ups), strict=True)] if ups else list(rates)
    return {v.name: out[v.name] for v in spec.vertices}


def oracle(
    spec: PipelineSpec, models: Mapping[str, VertexModel], rates: list[float] | tuple[float, ...]
) -> dict[str, list[int]]:
    """The least replicas per vertex and second that keep up with the load offered that second
    (``ceil(demand / sustained)``, what a replica keeps up with in micro-batches, within the
    vertex's ``scale.min``/``scale.max``), each asked for one start-up ahead, so it is ready when
    the load comes and pays for its start-up like any policy's replica: a backlog then never
    builds, and the target is always met."""
    out = {}
    offered = demand(spec, rates)
    for v in spec.vertices:
        scale = numaflow_scale(v.scale, v.name)
        model = models[v.name]
        cap, ahead = model.sustained(spec.limits.read_batch_size), math.ceil(model.startup_seconds)
        need = [min(scale.max, max(scale.min, math.ceil(rate / cap - 1e-9))) for rate in offered[v.name]]
        out[v.name] = [max(need[i : i + ahead + 1]) for i in range(len(need))]
    return out


def make_policies(
    name: str,
    spec: PipelineSpec,
    models: Mapping[str, VertexModel],
    trace: Trace,
    cores: int | None = None,
    tuning: Mapping[str, Any] | None = None,
) -> tuple[dict[str, VertexPolicy], dict[str, int]]:
    """The policy per vertex for ``name``, and the replicas each vertex starts with (``cores``:
    the replicas share that many task slots, Spark local mode). ``tuning``: a peer's own knobs,
    by their names here (``ds2``: :class:`~tidal.sim.peers.Ds2Policy`'s arguments; ``flink``:
    :class:`~tidal.scaling.flink.FlinkOptions`' fields), to tune it as its docs advise."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}: choose one of {', '.join(POLICIES)}")
    tuning = dict(tuning or {})
    if tuning and name not in TUNABLE:
        raise ValueError(f"tuning: policy {name!r} takes none; tune one of {', '.join(TUNABLE)}")
    known = TUNABLE.get(name, frozenset())
    if unknown := sorted(set(tuning) - known):
        raise ValueError(
            f"tuning: {name} has no knob {', '.join(unknown)}; its knobs: {', '.join(sorted(known))}"
        )
    scales = {v.name: numaflow_scale(v.scale, v.name) for v in spec.vertices}
    initial = {v: max(1, s.min) for v, s in scales.items()}
    policies: dict[str, VertexPolicy] = {}
    if name == "numaflow":
        return policies, initial
    if name == "tidal":
        return {v.name: adaptive_policy(v, shared_cores=cores is not None) for v in spec.vertices}, initial
    if name == "flink":  # one job: target rates flow from the sources, rescales are job-wide
        return dict(flink_policies(spec, options=FlinkOptions(**tuning))), initial
    if name == "static-peak":
        peaks = {n: max(rates, default=0) for n, rates in oracle(spec, models, trace.rates).items()}
        for n, peak in peaks.items():
            initial[n] = max(1, peak)
            policies[n] = StaticPeakPolicy(initial[n])
        return policies, initial
    ds2: dict[str, Ds2Policy] = {}
    for v in spec.vertices:
        s, model = scales[v.name], models[v.name]
        sustained = model.sustained(spec.limits.read_batch_size)  # what a replica really does
        if name == "kpa":
            kpa = KpaSpec(metric=KpaMetric.RPS, target=sustained, min_scale=s.min, max_scale=s.max)
            policies[v.name] = KpaPolicy(kpa, v.name, now=0.0, ready=initial[v.name])
        elif name == "ds2":
            upstream = tuple(ds2[e.from_] for e in spec.edges if e.to == v.name and e.from_ in ds2)
            ds2[v.name] = Ds2Policy(
                restart_seconds=model.startup_seconds,
                min_replicas=max(1, s.min),
                max_replicas=s.max,
                upstream=upstream,
                **tuning,
            )
            policies[v.name] = ds2[v.name]
        else:
            policies[v.name] = SparkDynamicAllocationPolicy(
                capacity=sustained, min_executors=s.min, max_executors=s.max
            )
    return policies, initial


def simulate(
    spec: PipelineSpec,
    trace: Trace,
    policy: str = DEFAULT_POLICY,
    models: Mapping[str, VertexModel] | None = None,
    *,
    wake_path: bool = True,
    policies: Mapping[str, VertexPolicy] | None = None,
    cores: int | None = None,
    tuning: Mapping[str, Any] | None = None,
) -> SimResult:
    """Replay ``trace`` through ``spec`` under ``policy``; see the module docstring.

    ``wake_path=False`` turns off the controller's path wake-up, to measure what it buys.
    ``policies`` runs policies of your own per vertex (the rest Numaflow's), labelled ``policy``.
    ``cores`` models Spark local mode: the vertices' replicas share that many task slots.
    ``tuning``: the peer's knobs (:func:`make_policies`).
    """
    models = dict(models) if models is not None else default_models(spec)
    if policies is None:
        policies, initial = make_policies(policy, spec, models, trace, cores, tuning)
    else:
        initial = {v.name: max(1, numaflow_scale(v.scale, v.name).min) for v in spec.vertices}
    sim = SimPipeline(spec, models, initial, cores=cores)
    result = SimResult(trace, policy, spec, models)
    controller = Controller(spec, sim, sim, _Recorder(result.changes), policies, wake_path=wake_path)
    names = list(sim.vertices)
    for name in names:
        result.replicas[name], result.ready[name], result.pending[name] = [], [], []
    interval = spec.controller.interval_seconds
    next_tick = interval
    delivered_before = 0
    for arrivals in trace.arrivals():
        vertices = sim.vertices.values()
        if arrivals and all(v.inputs.length == 0 for v in vertices) and any(not v.ready_at for v in vertices):
            result.empty_at_zero.append(sim.now)  # a cold start begins
        sim.step(arrivals)
        now = sim.now
        if now + 1e-9 >= next_tick:
            controller.tick(now)
            result.ticks.append(now)
            next_tick += interval
        result.times.append(now)
        for name in names:
            v = sim.vertices[name]
            result.replicas[name].append(len(v.ready_at))
            result.ready[name].append(v.ready(now))
            result.pending[name].append(v.inputs.length)
        total = sum(sim.delivered.values())
        result.delivered.append(total - delivered_before)
        delivered_before = total
    result.delays = dict(sim.delays)
    result.first_delivery = dict(sim.first_delivery)
    result.undelivered = [(born, int(n)) for v in sim.vertices.values() for born, n in v.inputs.cohorts]
    result.conservation = sim.conservation()
    result.retried = {name: v.retried for name, v in sim.vertices.items()}
    result.demand = demand(spec, trace.rates)
    result.oracle = oracle(spec, models, trace.rates)
    return result
