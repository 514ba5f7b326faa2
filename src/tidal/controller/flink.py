"""``policy: flink``: the Flink Kubernetes operator's autoscaler as a Tidal policy.

:func:`tidal.scaling.flink.compute_scale_target` decides one vertex; this module feeds it what
Flink's ``ScalingMetricCollector``/``ScalingMetricEvaluator`` would, from the counters Tidal
measures, and applies Flink's job-wide rules (``ScalingExecutor``):

* after the job starts or rescales, nothing is collected for ``stabilization.interval``; then
  a vertex decides only once its samples span a full ``metrics.window``, and decides over the
  window's averages;
* a vertex's *true processing rate* is what it read per busy second, times its parallelism
  (``numRecordsIn / (busyTime / parallelism)``, Flink's ``metrics.busy-time.aggregator: AVG``:
  Tidal measures busy seconds summed over the replicas, not per subtask);
* a source's target rate is its ingestion rate (what it read plus the growth of its lag),
  its catch-up rate ``lag / catch-up.duration``; a vertex downstream takes its inputs' target
  and catch-up rates, times the edge's output ratio, so the whole graph is sized in one step;
* the job rescales only if some vertex is outside its utilisation bounds; then every vertex
  with a change moves with it, metrics collection restarts for all, and so does stabilization.

The vertices of one pipeline share a :class:`FlinkJob`. The controller asks them one after
another in the spec's order, so a vertex asked before the one that triggers a rescale in the
same tick moves on its next tick (Flink applies all at once).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NoReturn

from tidal.controller.policy import PolicyInput, VertexPolicy
from tidal.scaling import Decision, Pressure, Rule
from tidal.scaling.flink import (
    DelayedScaleDown,
    FlinkOptions,
    ParallelismChange,
    ScalingSummary,
    VertexMetrics,
    compute_scale_target,
    observed_average,
    select_true_processing_rate,
)

__all__ = ["FlinkJob", "FlinkPolicy"]


@dataclass(frozen=True, slots=True)
class _Evaluated:
    """What a vertex measured over its last window, for the vertices downstream of it."""

    at: float
    target_rate: float
    catch_up_rate: float
    processed_rate: float
    backlog: bool


@dataclass
class FlinkJob:
    """The state Flink keeps per job, shared by its vertices' :class:`FlinkPolicy`.

    ``inputs``: each vertex's upstream vertices. A driver's saved state leaves it out (it does not
    pickle): a restarted controller starts a new job, collecting from scratch, as Flink does
    after its operator restarts with no stored metrics.
    """

    options: FlinkOptions
    inputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    started_at: float | None = None
    rescaled_at: float | None = None  # the job's last rescale
    prior: float | None = None  # the one before it
    evaluated: dict[str, _Evaluated] = field(default_factory=dict)
    restarts: deque[float] = field(default_factory=lambda: deque(maxlen=10))
    full: dict[str, bool] = field(default_factory=dict)  # input buffer ≥ 90 % of usable, last tick

    def held_back(self, vertex: str) -> bool:
        """Is a vertex that reads from ``vertex`` full (so ``vertex``'s writes wait)? Flink's back
        pressure time; Tidal's averaged back-pressure check lags a buffer that is filling."""
        return any(self.full.get(v, False) for v, ups in self.inputs.items() if vertex in ups)

    def restart_time(self) -> float:
        """Flink's ``getMaxRestartTimeOrDefault``: the longest tracked restart, within the limit."""
        o = self.options
        if o.restart_time_tracking_enabled and self.restarts:
            return min(max(self.restarts), o.restart_time_tracking_limit)
        return o.restart_time

    def since(self, now: float) -> float:
        """The job's start or last rescale before this tick (a rescale in this tick restarts the
        job after every vertex has been evaluated on the metrics it had)."""
        last = self.prior if self.rescaled_at == now else self.rescaled_at
        assert self.started_at is not None
        return self.started_at if last is None else last

    def rescale(self, now: float) -> None:
        if self.rescaled_at != now:
            self.prior, self.rescaled_at = self.rescaled_at, now

    def backlog(self) -> bool:
        """A source is more than ``backlog-processing.lag-threshold`` behind."""
        return any(e.backlog for e in self.evaluated.values())

    def __reduce__(self) -> NoReturn:
        raise TypeError("a FlinkJob links live policies; it is not saved")


class FlinkPolicy(VertexPolicy):
    """Flink's autoscaler on one vertex of a :class:`FlinkJob`; see the module docstring."""

    name = "flink"

    def __init__(
        self,
        vertex: str,
        job: FlinkJob,
        *,
        min_replicas: int = 1,
        max_replicas: int,
        max_parallelism: int | None = None,
        partitions: int = 0,
        keyed: bool = False,
    ) -> None:
        self.vertex = vertex
        self.job = job
        # vertex.min-parallelism / vertex.max-parallelism: the vertex's scale.min (at least 1) and max
        self.options = dataclasses.replace(
            job.options, vertex_min_parallelism=max(1, min_replicas), vertex_max_parallelism=max_replicas
        )
        # Flink's max parallelism (the key groups): a keyed vertex's partitions, else scale.max
        self.max_parallelism = max_replicas if max_parallelism is None else max_parallelism
        self.partitions = partitions  # a source's partitions where known (0: unknown)
        self.keyed = keyed
        self.samples: deque[tuple[float, float, float, float]] = deque()  # now, processed, busy, arrived
        self.observed: deque[tuple[float, float]] = deque()  # a source's (now, rate while catching up)
        self.collecting_since: float | None = None
        self.reset_at: float | None = None  # the job rescale the samples were reset for
        self.delayed = DelayedScaleDown()
        self.last: ScalingSummary | None = None
        self.carried: tuple[float, int, str] | None = None  # an in-bound change awaiting a rescale
        self.restarting_since: float | None = None
        self.tpr_from = ""  # "busy time" or "observed": which true processing rate was used

    def decide(self, view: PolicyInput) -> Decision:
        job, o, now = self.job, self.options, view.now
        if job.started_at is None:
            job.started_at = now  # the job's start counts as its last update
        if self.restarting_since is not None and view.ready >= view.ready_for:
            job.restarts.append(now - self.restarting_since)
            self.restarting_since = None
        usable = view.buffer_max_length * view.buffer_usage_limit
        job.full[self.vertex] = not view.kind.reads_source and (view.pending_now or 0.0) >= 0.9 * usable
        carried, self.carried = self.carried, None
        if carried is not None and carried[0] == job.rescaled_at != now and carried[1] != view.replicas:
            return self._move(
                view, carried[1], f"with the job's rescale at {carried[0]:.0f} s: {carried[2]}", {}
            )
        if view.replicas < 1:
            return self._move(view, 1, "a Flink vertex runs with parallelism 1 at least", {})
        since = job.since(now)
        if self.reset_at != since:  # the job restarted: collect afresh
            self.samples.clear()
            self.observed.clear()
            self.collecting_since = None
            self.delayed.clear()
            self.reset_at = since
        if view.busy_seconds is None or view.arrived is None:
            return self._hold(
                view, "no busy time or pending from the runtime: Flink's autoscaler cannot measure"
            )
        if now < since + o.stabilization_interval:
            return self._hold(
                view,
                f"stabilizing: {now - since:.0f} s of {o.stabilization_interval:g} s "
                "since the job's start or rescale",
            )
        if self.collecting_since is None:
            self.collecting_since = now
        self._observe(view)
        self.samples.append((now, view.processed, view.busy_seconds, view.arrived))
        while self.samples and self.samples[0][0] < now - o.metrics_window:
            self.samples.popleft()
        while self.observed and self.observed[0][0] < now - o.metrics_window:
            self.observed.popleft()
        collected = now - self.collecting_since
        t0, p0, b0, a0 = self.samples[0]
        if collected < o.metrics_window or now <= t0:
            return self._hold(
                view, f"collecting metrics: {collected:.0f} s of a {o.metrics_window:g} s window"
            )
        metrics, backlog = self._evaluate(
            view, now - t0, view.processed - p0, view.busy_seconds - b0, view.arrived - a0
        )
        restart = job.restart_time()
        change = compute_scale_target(
            metrics,
            o,
            now=now,
            restart_time=restart,
            delayed=self.delayed,
            last=self.last,
            backlog=job.backlog() or backlog,
        )
        inputs = {**self._inputs(metrics, change, restart), "trueProcessingRateFrom": self.tpr_from}
        if change.no_change:
            return self._hold(view, _held(change, metrics), inputs)
        reason = _rescaled(change, metrics, o)
        if change.outside_bound:
            job.rescale(now)
        elif job.rescaled_at != now:
            self.carried = (now, change.new, reason)
            return self._hold(
                view, f"{reason}, but within its bounds: waits for a vertex outside its bounds", inputs
            )
        self.last = ScalingSummary(
            change.current, change.new, metrics.true_processing_rate, change.expected_processing_rate
        )
        return self._move(view, change.new, reason, inputs)

    def _observe(self, view: PolicyInput) -> None:
        """A source's *observed* true processing rate (Flink's ``OBSERVED_TPR``): what it read
        since the last sample while its lag was at least ``observed-true-processing-rate.
        lag-threshold`` seconds of that rate (``inf`` when nothing came in). Not while back
        pressure held it back: Flink divides by the time not back-pressured, which Tidal does
        not measure, so such a sample is left out (a buffer it writes to was 90 % full)."""
        if not view.kind.reads_source or not self.samples:
            return
        if view.pressure.level != Pressure.NONE or self.job.held_back(self.vertex):
            return
        t0, p0 = self.samples[-1][0], self.samples[-1][1]
        if view.now <= t0:
            return
        rate = (view.processed - p0) / (view.now - t0)
        lag = view.pending_now or 0.0
        if rate == 0:
            self.observed.append((view.now, math.inf))
        elif lag >= self.options.observed_true_processing_rate_lag_threshold * rate:
            self.observed.append((view.now, rate))

    def _evaluate(
        self, view: PolicyInput, span: float, processed: float, busy: float, arrived: float
    ) -> tuple[VertexMetrics, bool]:
        """Flink's evaluated metrics for this vertex over the window, published for downstream."""
        o, job = self.options, self.job
        rate, arrival = processed / span, arrived / span
        parallelism = max(1, view.replicas)
        # nothing came in: Flink assumes infinite capacity until data flows
        busy_tpr = math.inf if rate == 0 else (math.inf if busy <= 0 else rate / (busy / span / parallelism))
        observed = observed_average(
            [x for _, x in self.observed], o.observed_true_processing_rate_min_observations
        )
        tpr, self.tpr_from = select_true_processing_rate(busy_tpr, observed, o)
        lag = max(0.0, view.pending_now or 0.0)
        own_catch_up = 0.0 if o.catch_up_duration == 0 else lag / o.catch_up_duration
        ups = [job.evaluated.get(u) for u in job.inputs.get(self.vertex, ())]
        backlog = False
        if view.kind.reads_source or not ups or None in ups:
            # A source (or a vertex whose inputs Flink's policy does not size): what arrives.
            target, catch_up = arrival, own_catch_up
            backlog = view.kind.reads_source and rate > 0 and lag / rate > o.backlog_processing_lag_threshold
        else:
            known = [u for u in ups if u is not None]
            fed = sum(u.processed_rate for u in known)
            ratio = arrival / fed if fed > 0 else 1.0
            target = sum(u.target_rate for u in known) * ratio
            # Tidal's buffers between vertices hold a backlog Flink keeps at the source: its own too.
            catch_up = sum(u.catch_up_rate for u in known) * ratio + own_catch_up
        job.evaluated[self.vertex] = _Evaluated(view.now, target, catch_up, rate, backlog)
        m = VertexMetrics(
            view.replicas, tpr, target, catch_up, self.max_parallelism, self.partitions, self.keyed
        )
        return m, backlog

    @staticmethod
    def _inputs(m: VertexMetrics, c: ParallelismChange, restart: float) -> dict[str, object]:
        return {
            "trueProcessingRate": m.true_processing_rate,
            "targetDataRate": m.target_data_rate,
            "catchUpDataRate": m.catch_up_data_rate,
            "targetCapacity": c.capacity,
            "scaleFactor": c.scale_factor,
            "scaleUpRateThreshold": c.thresholds[0],
            "scaleDownRateThreshold": c.thresholds[1],
            "outsideUtilizationBound": c.outside_bound,
            "restartTime": restart,
            "alignment": c.alignment.how if c.alignment is not None else "",
            "step": c.step,
        }

    def _move(self, view: PolicyInput, desired: int, reason: str, inputs: Mapping[str, object]) -> Decision:
        if desired > view.replicas:
            self.restarting_since = view.now
        return Decision(
            view.name, view.now, view.replicas, desired, Rule.FLINK_RESCALE, reason, inputs, desired
        )

    @staticmethod
    def _hold(view: PolicyInput, reason: str, inputs: Mapping[str, object] | None = None) -> Decision:
        return Decision(
            view.name, view.now, view.replicas, view.replicas, Rule.FLINK_HOLD, reason, inputs or {}
        )


def _sizing(m: VertexMetrics, c: ParallelismChange) -> str:
    return (
        f"true rate {m.true_processing_rate:.0f}/s at {m.parallelism}, target {m.target_data_rate:.0f}/s"
        f" + catch-up {m.catch_up_data_rate:.0f}/s → capacity {c.capacity:.0f}/s"
    )


def _rescaled(c: ParallelismChange, m: VertexMetrics, o: FlinkOptions) -> str:
    capped = f" (capped by {c.capped}.max-factor)" if c.capped else ""
    aligned = (
        f", {c.alignment.how} to the {m.partitions or m.max_parallelism} key groups/partitions"
        if (c.alignment is not None and c.alignment.how not in ("not applicable", "off"))
        else ""
    )
    delayed = (
        f", the most recommended over {o.scale_down_interval:g} s"
        if c.step == "down" and o.scale_down_interval > 0
        else ""
    )
    return (
        f"{_sizing(m, c)} at utilization {o.utilization_target:g}: ×{c.scale_factor:.2f}{capped}"
        f"{aligned}{delayed} → {c.new}"
    )


def _held(c: ParallelismChange, m: VertexMetrics) -> str:
    if c.step == "no-rate":
        return "true processing rate unknown"
    if c.step == "no-target":
        return "target data rate unknown"
    if c.step == "delayed":
        return f"{_sizing(m, c)}: scale-down delayed within scale-down.interval"
    if c.step == "ineffective":
        return f"{_sizing(m, c)}: the last scale-up was ineffective, blocked"
    return f"{_sizing(m, c)}: {m.parallelism} is right"
