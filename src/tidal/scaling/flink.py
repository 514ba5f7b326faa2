"""Flink's autoscaler, one vertex's decision: ``JobVertexScaler.computeScaleTargetParallelism``
from the Flink Kubernetes operator's ``flink-autoscaler`` module, with its options and defaults.

Given a vertex's evaluated metrics over one metrics window (:class:`VertexMetrics`: its true
processing rate, the data rate it should sustain and the rate that catches up the lag):

* the *target capacity* is ``input / utilization.target + lag / catch-up.duration +
  input × restart.time / catch-up.duration`` (``AutoScalerUtils.getTargetProcessingCapacity``,
  rounded as Java's ``Math.round``);
* the scale factor ``capacity / true processing rate`` is capped to ``[1 − scale-down.max-factor,
  1 + scale-up.max-factor]``; the new parallelism is ``ceil(factor × current)``, within
  ``[min(current, vertex.min-parallelism), min(max(current, vertex.max-parallelism), max
  parallelism)]``, then aligned to the key groups or partitions (:mod:`tidal.scaling.flink_align`);
* the vertex is *outside its utilisation bounds* when its true processing rate is below the
  capacity at ``target + boundary`` (no restart term) or above the capacity at ``target −
  boundary`` (with it) (``ScalingMetricEvaluator.computeProcessingRateThresholds``); while a
  source's lag is more than ``backlog-processing.lag-threshold`` behind, the bounds are [0, 1];
* a scale-up is blocked when the previous one was ineffective (less than
  ``scaling.effectiveness.threshold`` of the expected increase, if detection is enabled); a
  scale-down waits ``scale-down.interval`` from when it was first wanted and then goes to the
  largest parallelism recommended within that interval (:class:`DelayedScaleDown`).

Job-wide rules (a rescale happens only if some vertex is outside its bounds; windows and
stabilization) belong to the caller: :mod:`tidal.controller.flink`.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from tidal.scaling.flink_align import Alignment, AlignmentMode, align

_INT_MAX = 2**31 - 1  # Java's Integer.MAX_VALUE: Flink's parallelism is an int

__all__ = [
    "DelayedScaleDown",
    "FlinkOptions",
    "ParallelismChange",
    "ScalingSummary",
    "VertexMetrics",
    "compute_scale_target",
    "java_round",
    "observed_average",
    "rate_thresholds",
    "scale",
    "select_true_processing_rate",
    "target_capacity",
]


@dataclass(frozen=True, slots=True)
class FlinkOptions:
    """``job.autoscaler.*`` options, by their Flink names (dots and dashes as underscores).

    Defaults are Flink's, except those marked Tidal: Flink's are tuned for jobs that run for
    days (a 15-minute window, 5-minute stabilization, 30-minute catch-up, one hour before a
    scale-down) and would barely move within a Tidal run or a 20-minute simulated trace. Tidal
    uses the :class:`~tidal.sim.peers.Ds2Policy` values (a 120 s window, 60 s stabilization and a
    300 s catch-up, as Amazon EMR ships) and shrinks the other durations in proportion.
    """

    utilization_target: float = 0.7
    target_utilization_boundary: float = 0.3
    utilization_max: float | None = None  # default: target + boundary
    utilization_min: float | None = None  # default: target − boundary
    metrics_window: float = 120.0  # Tidal; Flink 15 min
    stabilization_interval: float = 60.0  # Tidal; Flink 5 min
    catch_up_duration: float = 300.0  # Tidal; Flink 30 min
    restart_time: float = 60.0  # Tidal; Flink 5 min (the default until one is tracked)
    restart_time_tracking_enabled: bool = True  # Tidal: readiness is measured; Flink false
    restart_time_tracking_limit: float = 180.0  # Tidal; Flink 15 min
    scale_down_interval: float = 480.0  # Tidal; Flink 1 h (4 windows, as Flink's)
    scale_down_max_factor: float = 0.6
    scale_up_max_factor: float = 100000.0
    vertex_min_parallelism: int = 1
    vertex_max_parallelism: int = 200
    backlog_processing_lag_threshold: float = 60.0  # Tidal; Flink 5 min
    scaling_effectiveness_detection_enabled: bool = False
    scaling_effectiveness_threshold: float = 0.1
    scaling_parallelism_alignment_mode: AlignmentMode = AlignmentMode.BALANCED
    observed_true_processing_rate_lag_threshold: float = 30.0
    observed_true_processing_rate_switch_threshold: float = 0.15
    observed_true_processing_rate_min_observations: int = 2

    def __post_init__(self) -> None:
        if not 0 <= self.utilization_target <= 1:
            raise ValueError(f"utilization.target must be in [0, 1], got {self.utilization_target}")
        if self.metrics_window <= 0 or self.catch_up_duration < 0 or self.restart_time < 0:
            raise ValueError("metrics.window must be > 0, catch-up.duration and restart.time >= 0")
        if not 0 <= self.scale_down_max_factor <= 1 or self.scale_up_max_factor < 0:
            raise ValueError("scale-down.max-factor must be in [0, 1], scale-up.max-factor >= 0")
        if self.vertex_min_parallelism < 1 or self.vertex_max_parallelism < self.vertex_min_parallelism:
            raise ValueError("need 1 <= vertex.min-parallelism <= vertex.max-parallelism")


@dataclass(frozen=True, slots=True)
class VertexMetrics:
    """One vertex's evaluated metrics (Flink's ``EvaluatedScalingMetric`` map), per second.

    ``true_processing_rate``: what the vertex would do at its current parallelism if always busy
    (``inf`` when nothing came in; ``nan`` unknown). ``target_data_rate``: what it should sustain
    (a source's ingestion rate; downstream, its inputs' target rates). ``catch_up_data_rate``:
    ``lag / catch-up.duration``. ``max_parallelism``: the key groups; ``partitions``: a source's
    partitions (``0`` unknown); ``keyed``: it reads keyed (``HASH``) input.
    """

    parallelism: int
    true_processing_rate: float
    target_data_rate: float
    catch_up_data_rate: float
    max_parallelism: int
    partitions: int = 0
    keyed: bool = False


@dataclass(frozen=True, slots=True)
class ScalingSummary:
    """A rescale, remembered for the ineffective-scaling check (Flink's ``ScalingSummary``)."""

    current: int
    new: int
    true_processing_rate: float
    expected_processing_rate: float

    @property
    def scaled_up(self) -> bool:
        return self.new > self.current


@dataclass(frozen=True, slots=True)
class ParallelismChange:
    """The result (Flink's ``ParallelismChange``) and how it came about, for the explanation.

    ``step``: ``no-rate`` (true processing rate unknown), ``no-target``, ``same`` (rounds to the
    current), ``ineffective`` (a scale-up blocked), ``delayed`` (a scale-down within its interval),
    ``up``/``down``.
    """

    new: int
    current: int
    outside_bound: bool
    step: str
    scale_factor: float = math.nan
    capacity: float = math.nan
    thresholds: tuple[float, float] = (math.nan, math.nan)
    capped: str = ""  # "scale-down" / "scale-up" when a max-factor capped the factor
    alignment: Alignment | None = None
    expected_processing_rate: float = math.nan

    @property
    def no_change(self) -> bool:
        return self.new == self.current


def java_round(x: float) -> float:
    """``Math.round`` (half up), which Flink applies to capacities; Python rounds half to even."""
    return x if math.isinf(x) or math.isnan(x) else float(math.floor(x + 0.5))


def observed_average(observed: list[float], min_observations: int) -> float:
    """Flink's ``getAverage(OBSERVED_TPR, …, min-observations)``: the mean of the finite values,
    ``inf`` if all are infinite (nothing came in), ``nan`` if fewer than ``min_observations``."""
    finite = [x for x in observed if math.isfinite(x)]
    if not finite:
        return math.inf if any(math.isinf(x) for x in observed) else math.nan
    return math.nan if len(finite) < min_observations else sum(finite) / len(finite)


def select_true_processing_rate(
    busy_time_tpr: float, observed_tpr: float, o: FlinkOptions
) -> tuple[float, str]:
    """Flink's ``selectTprMetric``: the busy-time rate, unless it is unknown or more than
    ``observed-true-processing-rate.switch-threshold`` above what a source was seen to read while
    catching up (busy time misses work done outside the measured tasks)."""
    if math.isnan(observed_tpr):
        return busy_time_tpr, "busy time"
    if math.isinf(busy_time_tpr) or math.isnan(busy_time_tpr):
        return observed_tpr, "observed"
    if busy_time_tpr > observed_tpr * (1 + o.observed_true_processing_rate_switch_threshold):
        return observed_tpr, "observed"
    return busy_time_tpr, "busy time"


def target_capacity(
    m: VertexMetrics, o: FlinkOptions, utilization: float, with_restart: bool, restart_time: float
) -> float:
    """``LAG/CATCH_UP + INPUT × RESTART/CATCH_UP + INPUT/UTILIZATION`` (records/s)."""
    if math.isnan(m.catch_up_data_rate) or math.isnan(m.target_data_rate):
        return math.nan
    utilization = min(1.0, max(0.0, utilization))
    if utilization == 0:
        return math.inf
    catch_up = o.catch_up_duration
    restart = 0.0 if not with_restart or catch_up == 0 else m.target_data_rate * restart_time / catch_up
    return java_round(m.catch_up_data_rate + restart + m.target_data_rate / utilization)


def rate_thresholds(
    m: VertexMetrics, o: FlinkOptions, backlog: bool, restart_time: float
) -> tuple[float, float]:
    """(scale-up, scale-down) rate thresholds: the capacities at the upper and lower utilisation."""
    if backlog:  # processing a backlog: use everything, and never scale down on low utilisation
        upper, lower = 1.0, 0.0
    else:
        b = o.target_utilization_boundary
        upper = o.utilization_max if o.utilization_max is not None else o.utilization_target + b
        lower = o.utilization_min if o.utilization_min is not None else o.utilization_target - b
    up = target_capacity(m, o, upper, False, restart_time)
    return up, target_capacity(m, o, lower, True, restart_time)


class DelayedScaleDown:
    """One vertex's delayed scale-down (Flink's ``VertexDelayedScaleDownInfo``): when a scale-down
    was first wanted, and the recommendations since, kept monotonically decreasing so the first is
    the largest within the interval."""

    def __init__(self) -> None:
        self.first_trigger: float | None = None
        self.recommended: deque[tuple[float, int, bool]] = deque()  # (at, parallelism, outside)

    def trigger(self, now: float, parallelism: int, outside: bool) -> None:
        if self.first_trigger is None:
            self.first_trigger = now
        while self.recommended and self.recommended[-1][1] <= parallelism:
            self.recommended.pop()
        self.recommended.append((now, parallelism, outside))

    def max_recommended(self, window_start: float) -> tuple[int, bool]:
        while self.recommended and self.recommended[0][0] < window_start:
            self.recommended.popleft()
        _, parallelism, outside = self.recommended[0]
        return parallelism, outside

    def clear(self) -> None:
        self.first_trigger = None
        self.recommended.clear()


def compute_scale_target(
    m: VertexMetrics,
    o: FlinkOptions,
    *,
    now: float,
    restart_time: float,
    delayed: DelayedScaleDown,
    last: ScalingSummary | None = None,
    backlog: bool = False,
) -> ParallelismChange:
    """``computeScaleTargetParallelism`` for one vertex; ``last``: its previous rescale."""
    current, tpr = m.parallelism, m.true_processing_rate
    if math.isnan(tpr):
        return ParallelismChange(current, current, False, "no-rate")
    capacity = target_capacity(m, o, o.utilization_target, True, restart_time)
    if math.isnan(capacity):
        return ParallelismChange(current, current, False, "no-target")
    thresholds = rate_thresholds(m, o, backlog, restart_time)
    factor = capacity / tpr
    low, high = 1 - o.scale_down_max_factor, 1 + o.scale_up_max_factor
    capped = "scale-down" if factor < low else "scale-up" if factor > high else ""
    factor = min(high, max(low, factor))
    lower = min(current, o.vertex_min_parallelism)
    upper = max(current, o.vertex_max_parallelism)
    new, aligned = scale(
        current,
        factor,
        lower,
        upper,
        max_parallelism=m.max_parallelism,
        partitions=m.partitions,
        keyed=m.keyed,
        mode=o.scaling_parallelism_alignment_mode,
    )

    def change(n: int, outside: bool, step: str) -> ParallelismChange:
        expected = tpr / current * n if n != current else math.nan
        return ParallelismChange(
            n, current, outside, step, factor, capacity, thresholds, capped, aligned, expected
        )

    if new == current:
        delayed.clear()
        return change(current, False, "same")
    outside = tpr < thresholds[0] or tpr > thresholds[1]
    if new > current:
        delayed.clear()
        if last is not None and current == last.new and last.scaled_up and _ineffective(o, last, tpr):
            return change(current, False, "ineffective")
        return change(new, outside, "up")
    if o.scale_down_interval <= 0:
        return change(new, outside, "down")
    delayed.trigger(now, new, outside)
    assert delayed.first_trigger is not None
    window_start = now - o.scale_down_interval
    if window_start < delayed.first_trigger:
        return change(current, False, "delayed")
    most, most_outside = delayed.max_recommended(window_start)
    return change(most, most_outside, "down" if most != current else "same")


def scale(
    current: int,
    factor: float,
    lower: int,
    upper: int,
    *,
    max_parallelism: int,
    partitions: int = 0,
    keyed: bool = False,
    mode: AlignmentMode = AlignmentMode.BALANCED,
) -> tuple[int, Alignment | None]:
    """Flink's ``JobVertexScaler.scale``: ``ceil(factor × current)`` within ``[lower,
    min(upper, max_parallelism)]``, then aligned (``None``: no change, nothing to align)."""
    if lower > upper:
        raise ValueError(f"the parallelism lower limit {lower} is above the upper limit {upper}")
    raw = min(math.ceil(factor * current), _INT_MAX) if math.isfinite(factor * current) else _INT_MAX
    new = min(max(lower, raw), max_parallelism, upper)
    if new == current:
        return new, None
    aligned = align(
        mode,
        current=current,
        target=new,
        partitions=partitions,
        max_parallelism=max_parallelism,
        lower=lower,
        upper=upper,
        keyed=keyed,
    )
    return aligned.parallelism, aligned


def _ineffective(o: FlinkOptions, last: ScalingSummary, tpr: float) -> bool:
    """The last scale-up achieved less than ``scaling.effectiveness.threshold`` of the increase it
    expected, and blocking such scalings is enabled."""
    expected = last.expected_processing_rate - last.true_processing_rate
    actual = tpr - last.true_processing_rate
    if expected != 0:
        ratio = actual / expected
    else:  # Java's double division: ±inf, or NaN for 0/0 (which compares false)
        ratio = math.copysign(math.inf, actual) if actual != 0 else math.nan
    if ratio >= o.scaling_effectiveness_threshold:
        return False
    return o.scaling_effectiveness_detection_enabled
