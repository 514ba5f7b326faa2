"""The controller: sample every vertex, feed the windows, decide, apply, log. Once per tick.

``Controller.tick(now)`` is one pass, with time as an argument: tests and the simulator drive it
with their own clock; ``Controller.run()`` drives it with the wall clock in a thread of the
driver process. The decisions come from :mod:`tidal.scaling`; this module only gathers
inputs and applies outputs.

For every vertex, every tick:
1. **Sample.** The probe reads the vertex's processed count, its pending (the input buffer's
   for a UDF or sink, the source's own ``pending()`` for a source) and its replicas.
2. **Record** both in the vertex's :class:`~tidal.scaling.Rater`; every 30 s the vertex's
   lookback adapts to its longest quiet spell (Numaflow's dynamic lookback).
3. **Back pressure.** The averaged pending of every buffer, against
   ``bufferMaxLength × bufferUsageLimit``, gives it for each vertex.
4. **Decide.** The vertex's :class:`~tidal.controller.policy.VertexPolicy` decides from a
   :class:`~tidal.controller.policy.PolicyInput`. A vertex given no policy object runs
   Numaflow's (:class:`~tidal.controller.policy.NumaflowPolicy`): a UDF or sink at 0 with
   messages waiting is woken at once (the activator), otherwise Numaflow's rules apply. The
   runtime passes the spec's choice (:mod:`tidal.controller.choose`; ``tidal`` unless a vertex
   names another), and the simulator other policies to compare them on the same inputs.
   **Path wake-up:** when a vertex wakes on pending, the vertices at zero downstream of it
   wake in the same tick (their policy's ``wake_for_path``), so a chain's start-up delays
   overlap instead of adding up. ``wake_path=False`` turns it off.
5. **Apply** a change to the control store, which the vertex's reader consults at its next
   micro-batch, and **log** it to the event log.

A probe that fails for one vertex (a user source whose ``pending()`` raises) makes that sample
"not available": the policy leaves the vertex alone, the failure is logged, the loop goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping

from tidal.controller.neighbours import heading_to, on_its_way, shared_rate_limit, upstream_limit
from tidal.controller.policy import NumaflowPolicy, PolicyInput, VertexPolicy
from tidal.controller.ports import Actuator, DecisionRecorder, Probe, ProbeSample
from tidal.controller.restart import Restored, StateFile, restore, restore_notes, snapshot
from tidal.controller.state import (
    VertexState,
    adapt_lookback,
    due_at,
    hold_down_after_outage,
    outage_note,
    scaled,
    watch_progress,
)
from tidal.scaling import (
    BufferLoad,
    Decision,
    Rater,
    Rule,
    VertexKind,
    check_back_pressure,
)
from tidal.spec import PipelineSpec, graph, numaflow_scale

__all__ = ["Actuator", "Controller", "DecisionRecorder", "Probe", "ProbeSample"]

log = logging.getLogger("tidal.controller")


class Controller:
    """Autoscales every vertex of ``spec``; see the module docstring for one tick.

    ``policies`` overrides the policy of some vertices (by name); the others get
    :class:`~tidal.controller.policy.NumaflowPolicy` with their ``scale:`` block. The runtime
    passes the spec's choice for every vertex (:func:`tidal.controller.choose.spec_policies`,
    ``tidal`` by default), so only a vertex that names ``numaflow`` comes without one.
    """

    def __init__(
        self,
        spec: PipelineSpec,
        probe: Probe,
        actuator: Actuator,
        events: DecisionRecorder,
        policies: Mapping[str, VertexPolicy] | None = None,
        *,
        wake_path: bool = True,
        operator: Actuator | None = None,
    ) -> None:
        self.spec = spec
        self.probe = probe
        self.actuator = actuator
        # Where a person's writes go (tidal.controller.replicas): applied even under --dry-run.
        self.operator = operator or actuator
        self.events = events
        self._usable = {v.name: spec.limits_of(v.name).usable_length for v in spec.vertices}
        edges = graph.edges_of(spec)
        # The graph does not change while the controller runs: walk it once per vertex.
        self._downstream = {v.name: graph.downstream_edges(v.name, edges) for v in spec.vertices}
        # Every vertex with a path to each vertex (a vertex's downstream edges are all it reaches).
        self._upstream: dict[str, set[str]] = {v.name: set() for v in spec.vertices}
        for v in spec.vertices:
            for e in self._downstream[v.name]:
                self._upstream[e.to].add(v.name)
        self.wake_path = wake_path
        policies = dict(policies or {})
        unknown = set(policies) - {v.name for v in spec.vertices}
        if unknown:
            raise ValueError(f"policies for vertices not in the pipeline: {sorted(unknown)}")
        self._vertices = {}
        # The vertices with an edge into each vertex: what they deliver bounds what arrives.
        self._feeders = {v.name: {e.source for e in edges if e.to == v.name} for v in spec.vertices}
        for v in spec.vertices:
            scale = numaflow_scale(v.scale, v.name)
            policy = policies.get(v.name) or NumaflowPolicy(scale)
            self._vertices[v.name] = VertexState(
                v.name,
                VertexKind(v.kind),  # the spec's kind names are the enum's values
                scale.lookback_seconds,
                policy,
                Rater(),
                configured_lookback=scale.lookback_seconds,
            )
        self._stuck_after = spec.controller.stuck_after_seconds
        self._stop = threading.Event()
        self._poked = threading.Event()  # set by stop() too, so the wait ends at once
        self._thread: threading.Thread | None = None
        # Ticks and the writes that come from outside (a scale, a pause, a retune) take turns.
        self._lock = threading.RLock()
        self.paused = False  # no decisions while a pipeline is paused
        # Restored a killed driver's state (:meth:`restore`): its first tick need not wait for
        # Spark's warm-up, since its windows are the old driver's and a scale-down is held.
        self.resumed = False
        self._last_tick: float | None = None
        # Where the runtime keeps the controller's state after each tick (None: nowhere, as in
        # the simulator): a restarted driver resumes from it (tidal.controller.restart).
        self.state_file: StateFile | None = None

    def decisions(self) -> Mapping[str, Decision | None]:
        """The latest decision per vertex (``None`` before the first tick)."""
        return {name: v.last for name, v in self._vertices.items()}

    def metrics(self) -> Mapping[str, tuple[float | None, float | None]]:
        """The latest ``(rate, averaged pending)`` per vertex, as the last decision saw them."""
        return {name: (v.rate, v.pending) for name, v in self._vertices.items()}

    # -- one pass ------------------------------------------------------------------------------

    def tick(self, now: float) -> list[Decision]:
        with self._lock:
            return self._tick(now)

    # -- from outside: a scale written to the scale subresource, a pause, a live edit -----------

    def external(
        self, vertex: str, current: int, replicas: int, now: float, reason: str, **inputs: object
    ) -> Decision:
        """A replica count written from outside (the scale subresource, ``tidal scale``): applied
        here, recorded as a decision with who wrote it, and counted as the vertex's last scaling,
        so its cooldown holds the count before the autoscaler moves it again (Numaflow's vertex
        controller sets ``lastScaledAt`` when the replicas change, whoever changed them)."""
        with self._lock:
            self.operator.set_replicas(vertex, replicas)
            v = self._vertices[vertex]
            decision = Decision(vertex, now, current, replicas, Rule.EXTERNAL, reason, dict(inputs))
            scaled(v, current, replicas, now)
            v.last = decision
            self.events.record(decision)
            log.info("%s", decision.explain())
            return decision

    def note(
        self, vertex: str, now: float, rule: Rule, current: int, desired: int, reason: str, **inputs: object
    ) -> None:
        """A lifecycle change of ``vertex`` (paused, resumed, retuned) in the event log."""
        with self._lock:
            decision = Decision(vertex, now, current, desired, rule, reason, dict(inputs))
            self._vertices[vertex].last = decision
            self.events.record(decision)
            log.info("%s", decision.explain())

    def lifecycle(
        self, vertex: str, now: float, rule: Rule, current: int, desired: int, reason: str, **inputs: object
    ) -> None:
        """A lifecycle change of ``vertex``'s replicas (paused to 0, resumed): applied, and noted."""
        with self._lock:
            self.operator.set_replicas(vertex, desired)
            self.note(vertex, now, rule, current, desired, reason, **inputs)

    def held(self) -> threading.RLock:
        """The lock ticks take: hold it to change several vertices between two ticks."""
        return self._lock

    def retune(
        self, spec: PipelineSpec, changed: Collection[str], policies: Mapping[str, VertexPolicy] | None = None
    ) -> None:
        """Take a live edit of ``spec``'s scale blocks, policies and controller settings (the same
        vertices and edges: :mod:`tidal.spark.run.operations` refuses the rest). The ``changed``
        vertices get their new policy (from ``policies``, else Numaflow's with their scale block);
        every vertex keeps its rates, its last scaling and its lookback history, and the others
        keep their policy and what it learnt."""
        if [v.name for v in spec.vertices] != list(self._vertices):
            raise ValueError("retune keeps the vertices: a changed graph needs a restart")
        with self._lock:
            policies = dict(policies or {})
            for v in spec.vertices:
                if v.name not in changed:
                    continue
                scale = numaflow_scale(v.scale, v.name)
                state = self._vertices[v.name]
                state.policy = policies.get(v.name) or NumaflowPolicy(scale)
                if scale.lookback_seconds != state.configured_lookback:
                    state.configured_lookback = state.lookback_seconds = scale.lookback_seconds
            self.spec = spec
            self._usable = {v.name: spec.limits_of(v.name).usable_length for v in spec.vertices}
            self._stuck_after = spec.controller.stuck_after_seconds

    def _tick(self, now: float) -> list[Decision]:
        samples: dict[str, ProbeSample | None] = {}
        for name, v in self._vertices.items():
            try:
                sample = self.probe.sample(name)
            except Exception as exc:  # a broken probe must not stop the pipeline's autoscaling
                log.warning(
                    "vertex %s: sampling failed (%s: %s); leaving it alone", name, type(exc).__name__, exc
                )
                sample = None
                v.active_at = now  # not known: counted as working
                v.last = outage_note(v, now, exc)  # the live view and the event log say so
                self.events.record(v.last)
                v.outage_since = v.outage_since if v.outage_since is not None else now
            samples[name] = sample
            if sample is not None:
                if v.outage_since is not None:  # numbers again: the window still holds the hole
                    v.outage_since, v.numbers_back_at = None, now
                v.rater.record(now, self._counters(v, sample), sample.pending)
                self._report(v, watch_progress(v, sample, now, self._stuck_after), now)
        for name, v in self._vertices.items():
            adapt_lookback(v, now)
            if on_its_way(self._upstream[name], self._vertices, samples):
                v.active_at = now  # work on its way is no idleness (neighbours.on_its_way)
        # Rate and averaged pending once per vertex: the back-pressure loads and the decisions
        # both read them.
        metrics = {name: v.rater.metrics(now, v.lookback_seconds) for name, v in self._vertices.items()}
        for name, v in self._vertices.items():
            v.rate, v.pending = metrics[name]
            if v.started_at is None:
                v.started_at = now
        loads = {
            name: BufferLoad(pending, self._usable[name])
            for name, v in self._vertices.items()
            if not v.kind.reads_source and (pending := metrics[name][1]) is not None
        }
        views = {
            name: self._view(
                v,
                sample,
                metrics[name],
                now,
                loads,
                heading_to(self._upstream[name], self._vertices, samples),
            )
            for name, v in self._vertices.items()
            if (sample := samples[name]) is not None
        }
        decisions = {name: self._vertices[name].policy.decide(view) for name, view in views.items()}
        if self.wake_path:
            self._wake_paths(views, decisions)
        out = []
        for name, decided in decisions.items():
            v = self._vertices[name]
            decision = hold_down_after_outage(v, decided, now)
            if decision.changed:
                self.actuator.set_replicas(name, decision.desired)
                scaled(v, decision.current, decision.desired, now, due_at(decision))
                log.info("%s", decision.explain())
            v.last = decision
            self.events.record(decision)
            out.append(decision)
        self._last_tick = now
        return out

    def idle_for(self, now: float) -> Mapping[str, float]:
        """Per vertex, for how long it has had nothing pending and processed nothing (0 while it
        works, or while its probe fails): the executor allocator releases an idle vertex's slots."""
        with self._lock:
            return {
                name: 0.0 if v.active_at is None else max(0.0, now - v.active_at)
                for name, v in self._vertices.items()
            }

    def progress(self) -> tuple[float, float, float] | None:
        """``(at, delivered, pending)`` at the last tick: messages the last vertices of the graph
        (sinks, MonoVertices, chains that end in a sink) have processed so far, and messages
        pending across the vertices then — what the executor allocator measures each executor
        count by (:class:`~tidal.scaling.executor_payoff.ExecutorPayoff`). ``None`` before the
        first tick."""
        with self._lock:
            if self._last_tick is None:
                return None
            feeding = {e.from_ for e in self.spec.edges}
            last = (v for name, v in self._vertices.items() if name not in feeding)
            delivered = sum(v.processed or 0.0 for v in last)
            waiting = (v.rater.latest_pending() for v in self._vertices.values())
            return self._last_tick, delivered, sum(max(0.0, p) for p in waiting if p is not None)

    def stuck(self, now: float) -> Mapping[str, float | None]:
        """Per vertex, for how long it has been stuck (pending, nothing processed), or ``None``."""
        return {
            name: None if v.stuck_since is None or v.progress_at is None else now - v.progress_at
            for name, v in self._vertices.items()
        }

    def _report(self, v: VertexState, rule: tuple[Rule, str] | None, now: float) -> None:
        """A vertex found stuck, or moving again: logged and recorded, not acted on."""
        if rule is None:
            return
        replicas = v.last.current if v.last is not None else 0
        note = Decision(v.name, now, replicas, replicas, rule[0], rule[1], {"progressAt": v.progress_at})
        (log.warning if rule[0] == Rule.STUCK else log.info)("%s", note.explain())
        self.events.record(note)

    @staticmethod
    def _counters(v: VertexState, sample: ProbeSample) -> Mapping[str, float]:
        """What the rater records: per pod for a MonoVertex (its daemon's rater reads each pod's
        count), one series for a vertex (one partition, its pods' counts summed, as upstream)."""
        if v.kind == VertexKind.MONOVERTEX and sample.read_counts is not None:
            return sample.read_counts
        return {"all": sample.processed}

    def lookbacks(self) -> Mapping[str, float]:
        """The lookback in use per vertex (Numaflow's dynamic lookback, §3.4)."""
        return {name: v.lookback_seconds for name, v in self._vertices.items()}

    def _wake_paths(self, views: Mapping[str, PolicyInput], decisions: dict[str, Decision]) -> None:
        """Every vertex that woke on pending wakes the vertices at zero downstream of it."""
        woken = [n for n, d in decisions.items() if d.rule == Rule.WAKE_ON_PENDING and d.current == 0]
        for origin in woken:
            for name in dict.fromkeys(e.to for e in self._downstream[origin]):
                view, decision = views.get(name), decisions.get(name)
                if view is None or decision is None or decision.changed:
                    continue
                path_decision = self._vertices[name].policy.wake_for_path(view, origin)
                if path_decision is not None:
                    decisions[name] = path_decision

    def _view(
        self,
        v: VertexState,
        sample: ProbeSample,
        metrics: tuple[float | None, float | None],
        now: float,
        loads: Mapping[str, BufferLoad],
        upstream: tuple[float, float | None, float] = (0.0, None, 0.0),
    ) -> PolicyInput:
        limits = self.spec.limits_of(v.name)
        return PolicyInput(
            name=v.name,
            kind=v.kind,
            now=now,
            replicas=sample.replicas,
            ready=sample.replicas if sample.ready is None else sample.ready,
            processed=sample.processed,
            pending_now=sample.pending,
            busy_seconds=sample.busy_seconds,
            rate=metrics[0],
            pending=metrics[1],
            last_scaled_at=v.last_scaled_at,
            started_at=v.started_at if v.started_at is not None else now,
            pressure=check_back_pressure(v.name, self._downstream[v.name], loads),
            buffer_max_length=limits.buffer_max_length,
            buffer_usage_limit=limits.buffer_usage_limit,
            read_batch_size=limits.read_batch_size,
            upstream_pending=upstream[0],
            upstream_arrived=upstream[1],
            upstream_age=upstream[2],
            arrived_age=sample.age,
            upstream_limit=upstream_limit(self._feeders[v.name], self._vertices),
            sink_retried=sample.sink_retried,
            rate_limit=shared_rate_limit(self.spec, v, now),
            throttled_at=sample.throttled_at,
            tasks=sample.tasks,
            attainable=sample.attainable,
        )

    # -- across a driver restart (tidal.controller.restart) -------------------------------------

    def _fingerprints(self) -> dict[str, str]:
        """What each vertex's policy learnt under: its kind, policy and ``scale:`` block."""
        return {v.name: repr((v.kind, self.spec.policy_of(v.name), v.scale)) for v in self.spec.vertices}

    def snapshot(self) -> bytes:
        """The controller's state now, for :meth:`restore` in the next driver."""
        with self._lock:
            return snapshot(self._vertices, self._fingerprints(), self._last_tick or 0.0)

    def restore(self, data: bytes, now: float) -> Restored:
        """Resume from a :meth:`snapshot` (before the first tick): windows, cooldowns, lookbacks
        and learnt policies come back; each vertex's event says what did and what did not."""
        with self._lock:
            done = restore(data, self._vertices, self._fingerprints())
            for name in done.restored:  # the restart is a hole in its window: no scale-down over it
                v = self._vertices[name]
                v.outage_since, v.numbers_back_at, v.hole = None, now, "the driver's restart"
            self.resumed = bool(done.restored)
            for note in restore_notes(done, self._vertices, now):
                log.info("%s", note.explain())
                self.events.record(note)
            return done

    # -- the loop ------------------------------------------------------------------------------

    def run(self, clock: Callable[[], float] = time.time, ready: Callable[[], bool] | None = None) -> None:
        """Tick every ``controller.intervalSeconds`` until :meth:`stop` (blocking). With ``ready``,
        the first tick waits until it says yes (the runtime: every query ran its first
        micro-batch, so Spark's warm-up is not mistaken for an idle pipeline). A controller that
        :attr:`resumed` a killed driver's state is given no ``ready``: it decides from its first
        tick (the chaos bench measured 12–21 s of no decisions after a driver restart while it
        waited), on the old driver's windows, with scale-downs held for one lookback."""
        next_at = clock()
        while not self._stop.is_set():
            try:
                if (ready is None or ready()) and not self.paused:
                    ready = None
                    self.tick(clock())
                    if self.state_file is not None:
                        self.state_file.keep(self.snapshot())
            except Exception:  # keep autoscaling alive; the traceback goes to the log
                log.exception("controller tick failed")
            next_at += self.spec.controller.interval_seconds  # read each time: a live edit may change it
            if self._poked.wait(max(0.0, next_at - clock())) and not self._stop.is_set():
                self._poked.clear()
                next_at = clock()  # a poke: tick now, then on the interval from here

    def start(self, ready: Callable[[], bool] | None = None) -> Controller:
        self._thread = threading.Thread(
            target=self.run, kwargs={"ready": ready}, name="tidal-controller", daemon=True
        )
        self._thread.start()
        return self

    def poke(self) -> None:
        """Tick now rather than at the next interval (Knative's poke: a request arrived at a
        source at zero, and its activator holds it until a replica is ready)."""
        self._poked.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._poked.set()
        if self._thread is not None:
            self._thread.join(timeout)
