"""The policies users would otherwise pick, from their published rules, for the simulator.

Each is a :class:`~tidal.controller.VertexPolicy`, driven by the same controller on the same
inputs as Tidal's own policies, and returns explained :class:`~tidal.scaling.Decision` values.
They are models of the published algorithms, not of every knob of the products:

* :class:`StaticPeakPolicy` — what most streaming jobs run: provisioned once for the peak.
* :class:`Ds2Policy` — DS2 (Kalavri et al., "Three steps is all you need: fast, accurate,
  automatic scaling decisions for distributed streaming dataflows", OSDI 2018), as the Flink
  Kubernetes operator's autoscaler implements it (``flink-kubernetes-operator`` docs,
  "Autoscaler"): the *true processing rate* (records per busy second) gives the parallelism
  that carries the target rate at ``job.autoscaler.target.utilization`` (0.7), plus a catch-up
  term for the lag, ``lag / job.autoscaler.catch-up.duration``, and for the records that pile
  up while restarting, ``rate × restart.time / catch-up.duration``. It holds while utilization
  is within ``target ± job.autoscaler.target.utilization.boundary`` (0.3), for
  ``job.autoscaler.stabilization.interval`` after a rescale, and shrinks by at most
  ``job.autoscaler.scale-down.max-factor`` (0.6) at once. It decides only over a full metrics
  window, collected again after every rescale. Target rates propagate from the sources down
  the graph, so DS2 sizes every vertex in one step. It never goes to zero.
* :class:`SparkDynamicAllocationPolicy` — Spark's ``ExecutorAllocationManager`` (Spark docs,
  "Dynamic Resource Allocation"; ``spark.dynamicAllocation.*``): while tasks are backlogged for
  ``schedulerBacklogTimeout`` (1 s) it requests executors, 1 the first round and twice the
  previous each ``sustainedSchedulerBacklogTimeout`` (1 s) after, never more than the pending and
  running tasks need; an executor with no task for ``executorIdleTimeout`` (60 s) is removed.

Deliberate choices of the models, the same for every trace:

* Flink's own defaults (a 15-minute metrics window, 5-minute stabilization, 30-minute catch-up)
  are tuned for jobs that run for days and would barely move within these 20–30 minute traces.
  :class:`Ds2Policy` defaults to a 120 s window (Numaflow's lookback), 60 s stabilization and
  a 300 s catch-up (the values Amazon EMR ships). All are arguments.
* Spark's tasks are modelled as ``task_seconds`` (1 s) of one replica's work each, packed onto
  as few executors as do the work: the most favourable reading of "idle" for Spark.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Mapping

from tidal.controller import PolicyInput, VertexPolicy
from tidal.controller.policy import NumaflowPolicy
from tidal.scaling import Decision, NumaflowScale, Rule

__all__ = ["Ds2Policy", "NumaflowUpstreamPolicy", "SparkDynamicAllocationPolicy", "StaticPeakPolicy"]


class NumaflowUpstreamPolicy(NumaflowPolicy):
    """Numaflow's rules as upstream runs them, for comparison: no hold for a failing sink, none
    for a vertex its rate limit holds back, and the rate-limit guard at ``rateLimit.max`` (not at
    what the ramp allows now), as in ``pkg/reconciler/vertex/scaling``."""

    name = "numaflow-upstream"

    def __init__(self, scale: NumaflowScale, rate_limit_max: float | None = None) -> None:
        super().__init__(scale)
        self.rate_limit_max = rate_limit_max

    def decide(self, view: PolicyInput) -> Decision:
        limit = self.rate_limit_max
        return super().decide(
            dataclasses.replace(view, sink_retried=None, throttled_at=None, rate_limit=limit)
        )


class StaticPeakPolicy(VertexPolicy):
    """Always ``replicas``: enough for the trace's peak, chosen before the run."""

    name = "static-peak"

    def __init__(self, replicas: int) -> None:
        if replicas < 1:
            raise ValueError(f"static replicas must be >= 1, got {replicas}")
        self.replicas = replicas

    def decide(self, view: PolicyInput) -> Decision:
        n = self.replicas
        return Decision(
            view.name,
            view.now,
            view.replicas,
            n,
            Rule.STATIC_PEAK,
            f"provisioned for the peak: {n} replica{'s' if n != 1 else ''}",
            {"replicas": n},
            n,
        )


class Ds2Policy(VertexPolicy):
    """DS2 / Flink autoscaler on one vertex; see the module docstring for the rule."""

    name = "ds2"

    def __init__(
        self,
        *,
        target_utilization: float = 0.7,
        boundary: float = 0.3,
        window_seconds: float = 120.0,
        stabilization_seconds: float = 60.0,
        catch_up_seconds: float = 300.0,
        restart_seconds: float = 8.0,
        scale_down_max_factor: float = 0.6,
        min_replicas: int = 1,
        max_replicas: int = 50,
        upstream: tuple[Ds2Policy, ...] = (),
    ) -> None:
        if not 0 < target_utilization <= 1:
            raise ValueError(f"target_utilization must be in (0, 1], got {target_utilization}")
        self.target = target_utilization
        self.boundary = boundary
        self.window = window_seconds
        self.stabilization = stabilization_seconds
        self.catch_up = catch_up_seconds
        self.restart = restart_seconds
        self.down_factor = scale_down_max_factor
        self.min = max(1, min_replicas)
        self.max = max_replicas
        self._history: deque[tuple[float, float, float, float]] = deque()  # now, processed, busy, arrived
        self._last_rescale: float | None = None
        self._collecting_since: float | None = None  # Flink restarts collection after a rescale
        self._true_rate: float | None = None  # messages per busy second of one replica
        # DS2 sizes the whole graph from the sources' rates in one step: a vertex downstream
        # takes its upstream's target rate (every vertex emits one message per message read),
        # not the rate a still too small upstream manages to pass on.
        self.upstream = upstream
        self.target_rate: float | None = None

    def decide(self, view: PolicyInput) -> Decision:
        now, current = view.now, view.replicas
        arrived = view.arrived
        if view.busy_seconds is None or arrived is None:
            return self._hold(view, "no busy time or pending from the runtime: DS2 cannot measure")
        if self._last_rescale is None:
            self._last_rescale = now
        if self._collecting_since is None:
            self._collecting_since = now
        self._history.append((now, view.processed, view.busy_seconds, arrived))
        while self._history and self._history[0][0] < now - self.window:
            self._history.popleft()
        t0, p0, b0, a0 = self._history[0]
        span = now - t0
        collected = now - self._collecting_since
        if collected < self.window or span <= 0:
            # Flink evaluates only over a full metrics window, after the start and every rescale.
            return self._hold(view, f"collecting metrics: {collected:.0f} s of a {self.window:g} s window")
        if view.busy_seconds > b0:
            self._true_rate = (view.processed - p0) / (view.busy_seconds - b0)
        measured = (arrived - a0) / span
        targets = [u.target_rate for u in self.upstream]
        input_rate = sum(t for t in targets if t is not None) if targets and None not in targets else measured
        self.target_rate = input_rate
        lag = view.pending_now or 0.0
        if current < self.min:
            return self._move(view, self.min, f"below the minimum parallelism {self.min}", {})
        if self._true_rate is None:
            return self._hold(view, "no busy time yet: true processing rate unknown")
        if now - self._last_rescale < self.stabilization:
            return self._hold(
                view,
                f"stabilizing: {now - self._last_rescale:.0f} s < {self.stabilization:g} s "
                "since the last rescale",
            )
        true_rate = self._true_rate
        catch_up = lag / self.catch_up + input_rate * self.restart / self.catch_up
        required = input_rate / self.target + catch_up
        utilization = (input_rate + lag / self.catch_up) / (max(1, view.ready) * true_rate)
        inputs = {
            "inputRate": input_rate,
            "lag": lag,
            "trueProcessingRate": true_rate,
            "utilization": utilization,
            "required": required,
        }
        wanted = min(self.max, max(self.min, math.ceil(required / true_rate - 1e-9)))
        low, high = self.target - self.boundary, self.target + self.boundary
        if low <= utilization <= high or wanted == current:
            return self._hold(
                view,
                f"utilization {utilization:.2f} within [{low:.2f}, {high:.2f}]"
                if wanted != current
                else f"{input_rate:.0f}/s at {true_rate:.0f}/s per replica: {current} is right",
                inputs,
            )
        floor = math.ceil(current * (1 - self.down_factor))
        desired = max(wanted, floor) if wanted < current else wanted
        capped = f" (scale-down capped at {self.down_factor:.0%})" if desired != wanted else ""
        return self._move(
            view,
            desired,
            f"input {input_rate:.0f}/s + lag {lag:.0f} over {self.catch_up:g} s at {true_rate:.0f}/s per "
            f"busy replica, target utilization {self.target:g} → {wanted}{capped}",
            inputs,
            wanted,
        )

    def _move(
        self,
        view: PolicyInput,
        desired: int,
        reason: str,
        inputs: Mapping[str, object],
        recommended: int | None = None,
    ) -> Decision:
        self._last_rescale = view.now
        self._history.clear()  # Flink restarts metric collection after a rescale
        self._collecting_since = None
        return Decision(
            view.name,
            view.now,
            view.replicas,
            desired,
            Rule.DS2_RESCALE,
            reason,
            inputs,
            recommended or desired,
        )

    def _hold(self, view: PolicyInput, reason: str, inputs: Mapping[str, object] | None = None) -> Decision:
        return Decision(
            view.name, view.now, view.replicas, view.replicas, Rule.DS2_HOLD, reason, inputs or {}
        )


class SparkDynamicAllocationPolicy(VertexPolicy):
    """Spark's dynamic allocation on one vertex; see the module docstring for the rule."""

    name = "spark-da"

    def __init__(
        self,
        *,
        capacity: float,
        task_seconds: float = 1.0,
        backlog_timeout: float = 1.0,
        sustained_backlog_timeout: float = 1.0,
        idle_timeout: float = 60.0,
        min_executors: int = 0,
        max_executors: int = 50,
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be > 0 messages/s per executor, got {capacity}")
        self.per_task = capacity * task_seconds  # messages in one task
        self.backlog_timeout = backlog_timeout
        self.sustained = sustained_backlog_timeout
        self.idle_timeout = idle_timeout
        self.min = min_executors
        self.max = max_executors
        self._backlog_since: float | None = None
        self._next_add_at: float | None = None
        self._to_add = 1
        self._surplus: deque[tuple[float, int]] = deque()  # (now, executors with no task)
        self._watching_since: float | None = None  # when the surplus history (re)started
        self._last: tuple[float, float] | None = None  # (now, busy seconds)

    def decide(self, view: PolicyInput) -> Decision:
        now, current = view.now, view.replicas
        pending = view.pending_now or 0.0
        tasks = math.ceil(pending / self.per_task - 1e-9)  # pending + running tasks
        needed = min(self.max, max(self.min, tasks))
        backlogged = tasks > view.ready
        inputs = {"pendingTasks": tasks, "maxNeeded": needed, "ready": view.ready}

        # Idle executors: those the last interval's work did not need (packed).
        busy_now = view.busy_seconds or 0.0
        if self._last is not None and now > self._last[0]:
            used = math.ceil((busy_now - self._last[1]) / (now - self._last[0]) - 1e-9)
            if self._watching_since is None:
                self._watching_since = self._last[0]
            self._surplus.append((now, max(0, view.ready - used)))
        self._last = (now, busy_now)
        while self._surplus and self._surplus[0][0] <= now - self.idle_timeout:
            self._surplus.popleft()

        if backlogged:
            if self._backlog_since is None:
                self._backlog_since = now
                self._next_add_at = now + self.backlog_timeout
            assert self._next_add_at is not None
            if now >= self._next_add_at and current < needed:
                desired = min(needed, current + self._to_add)
                added = desired - current
                reason = (
                    f"{tasks} tasks pending for {now - self._backlog_since:.0f} s: add {added} "
                    f"(round of {self._to_add}, capped at {needed} needed)"
                )
                self._to_add *= 2
                self._next_add_at = now + self.sustained
                self._forget_idle()
                return Decision(view.name, now, current, desired, Rule.SPARK_BACKLOG, reason, inputs, needed)
            return self._hold(
                view, f"{tasks} tasks pending; next request at {self._next_add_at:.0f} s", inputs
            )
        self._backlog_since = self._next_add_at = None
        self._to_add = 1
        # An executor idle for the whole timeout: the least surplus seen over that window.
        watched = self._watching_since is not None and now - self._watching_since >= self.idle_timeout
        idle = min((s for _, s in self._surplus), default=0) if watched else 0
        removable = min(idle, current - self.min)
        if removable > 0:
            self._forget_idle()
            return Decision(
                view.name,
                now,
                current,
                current - removable,
                Rule.SPARK_IDLE,
                f"{removable} executor{'s' if removable != 1 else ''} idle for "
                f"{self.idle_timeout:g} s: removed",
                inputs,
                current - removable,
            )
        return self._hold(view, f"{tasks} tasks, {view.ready} executors: nothing to do", inputs)

    def _forget_idle(self) -> None:
        """After a change the executors' idle clocks restart (new ones; busy ones kept)."""
        self._surplus.clear()
        self._watching_since = None

    def _hold(self, view: PolicyInput, reason: str, inputs: Mapping[str, object]) -> Decision:
        return Decision(view.name, view.now, view.replicas, view.replicas, Rule.SPARK_HOLD, reason, inputs)
