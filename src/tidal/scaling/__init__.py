"""Tidal's scaling core: Numaflow's and Knative's autoscalers as a pure, explainable library.

Nothing in this package does I/O, starts threads or reads a clock: every call takes ``now`` in
seconds. That is what lets the simulator, dry runs and the Spark runtime share one decision code.

    >>> from tidal.scaling import NumaflowScale, VertexObservation, PartitionMetrics, VertexKind, decide
    >>> obs = VertexObservation("in", VertexKind.SOURCE, replicas=2, ready_replicas=2,
    ...                         last_scaled_at=0.0,
    ...                         partitions=[PartitionMetrics("in", rate=10000, pending=60000)])
    >>> d = decide(NumaflowScale(target_processing_seconds=3), obs, now=1000.0)
    >>> d.desired, str(d.rule)
    (4, 'scale-up')
    >>> d.reason
    'avg pending 60000 at 10000/s over 2 replicas, target 3 s → 4'
"""

from tidal.scaling.backpressure import (
    BACK_PRESSURE_THRESHOLD,
    BufferLoad,
    Edge,
    OnFull,
    Pressure,
    PressureCheck,
)
from tidal.scaling.backpressure import check as check_back_pressure
from tidal.scaling.cron import CronExpr, CronSchedule, CronSpec
from tidal.scaling.decision import Decision, Rule
from tidal.scaling.kpa import KpaDecider, KpaResult, KpaScaler
from tidal.scaling.kpa_spec import (
    Aggregation,
    KpaMetric,
    KpaSpec,
    activator_count,
    initial_excess_burst_capacity,
)
from tidal.scaling.limits import (
    DEFAULT_MAX_LENGTH,
    DEFAULT_READ_BATCH_SIZE,
    DEFAULT_USAGE_LIMIT,
    BufferLimits,
    usable_length,
)
from tidal.scaling.lookback import adaptive_lookback
from tidal.scaling.numaflow import decide, wake_from_zero, wake_on_path
from tidal.scaling.numaflow_estimate import (
    BufferInfo,
    Estimate,
    PartitionMetrics,
    VertexKind,
    VertexObservation,
    desired_replicas,
)
from tidal.scaling.numaflow_scale import NumaflowScale, normalise_scale
from tidal.scaling.rates import CounterWindow, GaugeWindow, Rater
from tidal.scaling.windows import (
    MaxTimeWindow,
    TimedBuckets,
    WeightedBuckets,
    round_half_away,
    smoothing_coefficient,
)

__all__ = [
    "BACK_PRESSURE_THRESHOLD",
    "DEFAULT_MAX_LENGTH",
    "DEFAULT_READ_BATCH_SIZE",
    "DEFAULT_USAGE_LIMIT",
    "Aggregation",
    "BufferInfo",
    "BufferLimits",
    "BufferLoad",
    "CounterWindow",
    "CronExpr",
    "CronSchedule",
    "CronSpec",
    "Decision",
    "Edge",
    "Estimate",
    "GaugeWindow",
    "KpaDecider",
    "KpaMetric",
    "KpaResult",
    "KpaScaler",
    "KpaSpec",
    "MaxTimeWindow",
    "NumaflowScale",
    "OnFull",
    "PartitionMetrics",
    "Pressure",
    "PressureCheck",
    "Rater",
    "Rule",
    "TimedBuckets",
    "VertexKind",
    "VertexObservation",
    "WeightedBuckets",
    "activator_count",
    "adaptive_lookback",
    "check_back_pressure",
    "decide",
    "desired_replicas",
    "initial_excess_burst_capacity",
    "normalise_scale",
    "round_half_away",
    "smoothing_coefficient",
    "usable_length",
    "wake_from_zero",
    "wake_on_path",
]
