"""Knative's KPA configuration: ``config-autoscaler`` keys and revision annotations.

The reference is ``spec/knative.md`` §1.1–1.2.

:class:`KpaSpec` holds the parameters with upstream's defaults and validation ranges, and resolves
the target (``max(0.01, total × utilization)``). Knative's own keys, with Knative's meanings, come
in through :meth:`KpaSpec.from_knative`; a per-replica target and total through
:meth:`KpaSpec.per_replica`.

Deliberate difference: ``target_utilization`` is a fraction in (0, 1] and nothing else. Knative's
config key divides values above 1 by 100 while its annotation always divides (so ``1`` is 100 %
in one and 1 % in the other); :meth:`KpaSpec.from_knative` applies each rule to its own key, and
the field itself takes no guesses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tidal import errors
from tidal.scaling.durations import spec_seconds
from tidal.scaling.windows import round_half_away

__all__ = [
    "Aggregation",
    "KpaMetric",
    "KpaSpec",
    "activator_count",
    "initial_excess_burst_capacity",
]


_check = errors.require


class KpaMetric(StrEnum):
    CONCURRENCY = "concurrency"
    RPS = "rps"


class Aggregation(StrEnum):
    LINEAR = "linear"
    WEIGHTED_EXPONENTIAL = "weighted-exponential"


@dataclass(frozen=True, slots=True)
class KpaSpec:
    """KPA parameters. Names follow Knative's keys in snake case; defaults are upstream's."""

    metric: KpaMetric = KpaMetric.CONCURRENCY
    target: float | None = None
    container_concurrency: int = 0
    target_utilization: float = 0.7
    target_burst_capacity: float = 211.0
    stable_window: float = 60.0
    panic_window_percentage: float = 10.0
    panic_threshold_percentage: float = 200.0
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0
    enable_scale_to_zero: bool = True
    scale_to_zero_grace_period: float = 30.0
    scale_to_zero_pod_retention_period: float = 0.0
    scale_down_delay: float = 0.0
    activator_capacity: float = 100.0
    initial_scale: int = 1
    allow_zero_initial_scale: bool = False
    min_scale: int = 0
    max_scale: int = 0
    activation_scale: int = 0
    aggregation: Aggregation = Aggregation.LINEAR
    reachable: bool = True
    container_concurrency_target_default: float = 100.0
    requests_per_second_target_default: float = 200.0
    max_scale_limit: int = 0
    progress_deadline: float = 600.0
    # Knative's DeciderSpec.TargetValue / TotalValue given directly (KpaSpec.decider); None:
    # resolved from target, containerConcurrency and targetUtilization as the reconciler does.
    decider_target: float | None = None
    decider_total: float | None = None

    def __post_init__(self) -> None:
        tu = self.target_utilization
        _check(
            0 < tu <= 1,
            "kpa.targetUtilization",
            f"{tu} is outside (0, 1]",
            "use a fraction, e.g. 0.7; Knative's percentage keys go through KpaSpec.from_knative",
        )
        for key, default in (
            ("containerConcurrencyTargetDefault", self.container_concurrency_target_default),
            ("requestsPerSecondTargetDefault", self.requests_per_second_target_default),
        ):
            _check(
                default * tu >= 0.01,
                f"kpa.{key}",
                f"{default:g} × targetUtilization {tu:g} is below 0.01",
                "use a larger default",
            )
        _check(
            self.max_scale_limit >= 0,
            "kpa.maxScaleLimit",
            f"{self.max_scale_limit} is negative",
            "use 0 for none",
        )
        if self.max_scale_limit > 0:
            _check(
                1 <= self.max_scale <= self.max_scale_limit,
                "kpa.maxScale",
                f"{self.max_scale} is outside [1, maxScaleLimit {self.max_scale_limit}]",
                "set maxScale between 1 and max-scale-limit",
            )
        _check(
            self.progress_deadline > 0,
            "kpa.progressDeadline",
            f"{self.progress_deadline} must be > 0",
            "use e.g. 600 (Knative's default)",
        )
        _check(
            0 <= self.container_concurrency <= 1000,
            "kpa.containerConcurrency",
            f"{self.container_concurrency} is outside [0, 1000]",
            "use 0 for unlimited",
        )
        if self.target is not None:
            _check(self.target >= 0.01, "kpa.target", f"{self.target} is below 0.01", "use 0.01 or more")
        _check(
            self.target_burst_capacity >= 0 or self.target_burst_capacity == -1,
            "kpa.targetBurstCapacity",
            f"{self.target_burst_capacity} is invalid",
            "use 0 or more, or -1 to keep the activator always in the path",
        )
        _check(
            6 <= self.stable_window <= 3600 and float(self.stable_window).is_integer(),
            "kpa.stableWindow",
            f"{self.stable_window} is outside [6, 3600] whole seconds",
            "use e.g. 60",
        )
        _check(
            1 <= self.panic_window_percentage <= 100,
            "kpa.panicWindowPercentage",
            f"{self.panic_window_percentage} is outside [1, 100]",
            "use e.g. 10",
        )
        _check(
            110 <= self.panic_threshold_percentage <= 1000,
            "kpa.panicThresholdPercentage",
            f"{self.panic_threshold_percentage} is outside [110, 1000]",
            "use e.g. 200",
        )
        _check(
            self.max_scale_up_rate > 1,
            "kpa.maxScaleUpRate",
            f"{self.max_scale_up_rate} must be > 1",
            "use e.g. 1000",
        )
        _check(
            self.max_scale_down_rate > 1,
            "kpa.maxScaleDownRate",
            f"{self.max_scale_down_rate} must be > 1",
            "use e.g. 2",
        )
        _check(
            self.scale_to_zero_grace_period > 0,
            "kpa.scaleToZeroGracePeriod",
            f"{self.scale_to_zero_grace_period} must be > 0",
            "use e.g. 30",
        )
        _check(
            0 <= self.scale_to_zero_pod_retention_period <= 3600,
            "kpa.scaleToZeroPodRetentionPeriod",
            f"{self.scale_to_zero_pod_retention_period} is outside [0, 3600]",
            "use 0 to disable",
        )
        _check(
            0 <= self.scale_down_delay <= 3600 and float(self.scale_down_delay).is_integer(),
            "kpa.scaleDownDelay",
            f"{self.scale_down_delay} is outside [0, 3600] whole seconds",
            "use 0 to disable",
        )
        _check(
            self.activator_capacity >= 1,
            "kpa.activatorCapacity",
            f"{self.activator_capacity} < 1",
            "use e.g. 100",
        )
        _check(
            self.initial_scale >= 0, "kpa.initialScale", f"{self.initial_scale} is negative", "use 1 or more"
        )
        _check(
            self.initial_scale > 0 or self.allow_zero_initial_scale,
            "kpa.initialScale",
            "0 requires allowZeroInitialScale: true",
            "set allowZeroInitialScale or use 1",
        )
        _check(self.min_scale >= 0, "kpa.minScale", f"{self.min_scale} is negative", "use 0 or more")
        _check(self.max_scale >= 0, "kpa.maxScale", f"{self.max_scale} is negative", "use 0 for unbounded")
        _check(
            self.max_scale == 0 or self.min_scale <= self.max_scale,
            "kpa.maxScale",
            f"{self.max_scale} is below minScale {self.min_scale}",
            "raise maxScale or lower minScale",
        )
        _check(
            self.activation_scale >= 0 and (self.max_scale == 0 or self.activation_scale <= self.max_scale),
            "kpa.activationScale",
            f"{self.activation_scale} is outside [0, maxScale]",
            "use 2 or more, not above maxScale",
        )

    @property
    def total_value(self) -> float:
        """The 100 % capacity of one replica for the chosen metric."""
        if self.decider_total is not None:
            return self.decider_total
        if self.metric == KpaMetric.RPS:
            return self.target if self.target is not None else self.requests_per_second_target_default
        total = float(self.container_concurrency or self.container_concurrency_target_default)
        if self.target is not None:
            total = (
                min(self.target, self.container_concurrency) if self.container_concurrency else self.target
            )
        return total

    @property
    def target_value(self) -> float:
        """What one replica should carry: ``max(0.01, total × utilization)``."""
        if self.decider_target is not None:
            return self.decider_target
        return max(0.01, self.total_value * self.target_utilization)

    @property
    def panic_window(self) -> float:
        return max(1.0, round_half_away(self.stable_window * self.panic_window_percentage / 100))

    @property
    def panic_threshold(self) -> float:
        return self.panic_threshold_percentage / 100

    @property
    def activation_timeout(self) -> float:
        """How long a revision may stay activating before it may go to zero: progress deadline + 30 s."""
        return self.progress_deadline + 30.0

    @classmethod
    def per_replica(cls, target: float, total: float, **fields: Any) -> KpaSpec:
        """A spec whose replica should carry ``target`` of a ``total`` capacity (Knative's
        TargetValue and TotalValue, given directly): ``target = total × targetUtilization``."""
        _check(total >= 0.01, "kpa.total", f"{total} is below 0.01", "use the capacity of one replica")
        _check(
            0 < target <= total,
            "kpa.target",
            f"{target} is outside (0, total {total:g}]",
            "use a per-replica target no larger than its total",
        )
        return cls(target=total, target_utilization=target / total, **fields)

    @classmethod
    def decider(cls, target_value: float, total_value: float = 0.0, **fields: Any) -> KpaSpec:
        """A spec with the decider's ``TargetValue`` and ``TotalValue`` as Knative's deciders take
        them (``DeciderSpec``), e.g. upstream's own tests, which leave ``TotalValue`` at 0: no
        capacity per pod counts towards excess burst capacity."""
        _check(target_value >= 0.01, "kpa.targetValue", f"{target_value} is below 0.01", "use 0.01 or more")
        _check(total_value >= 0, "kpa.totalValue", f"{total_value} is negative", "use 0 or more")
        return cls(decider_target=target_value, decider_total=total_value, **fields)

    @classmethod
    def from_knative(
        cls,
        config: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> KpaSpec:
        """A spec from Knative's ``config-autoscaler`` keys and a revision's
        ``autoscaling.knative.dev/…`` annotations (the prefix may be left out), with Knative's
        meanings: ``container-concurrency-target-percentage`` above 1 is divided by 100, while the
        annotation ``target-utilization-percentage`` always is (``1`` means 1 %). Annotations win
        over the config, as in Knative; ``fields`` (snake case) win over both.
        """
        out: dict[str, Any] = {}
        for key, value in (config or {}).items():
            out.update(_from_config(str(key), value))
        for key, value in (annotations or {}).items():
            out.update(_from_annotation(str(key).removeprefix(_ANNOTATION_PREFIX), value))
        out.update(fields)
        return cls(**out)


_ANNOTATION_PREFIX = "autoscaling.knative.dev/"


def _seconds(key: str, value: Any) -> float:
    """A Go duration, or a bare number of seconds (a YAML number; Go would ask for a unit)."""
    return spec_seconds(value, f"kpa.{key}")


def _number(key: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise errors.SpecError(f"kpa.{key}", f"{value!r} is not a number", "write a number") from None


def _flag(key: str, value: Any) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise errors.SpecError(f"kpa.{key}", f"{value!r} is not true or false", "write true or false")
    return text == "true"


def _from_config(key: str, value: Any) -> dict[str, Any]:
    """One ``config-autoscaler`` key → KpaSpec fields."""
    if key == "container-concurrency-target-percentage":
        tu = _number(key, value)
        return {"target_utilization": tu / 100 if tu > 1 else tu}
    simple: dict[str, tuple[str, Any]] = {
        "container-concurrency-target-default": ("container_concurrency_target_default", _number),
        "requests-per-second-target-default": ("requests_per_second_target_default", _number),
        "target-burst-capacity": ("target_burst_capacity", _number),
        "stable-window": ("stable_window", _seconds),
        "panic-window-percentage": ("panic_window_percentage", _number),
        "panic-threshold-percentage": ("panic_threshold_percentage", _number),
        "max-scale-up-rate": ("max_scale_up_rate", _number),
        "max-scale-down-rate": ("max_scale_down_rate", _number),
        "enable-scale-to-zero": ("enable_scale_to_zero", _flag),
        "scale-to-zero-grace-period": ("scale_to_zero_grace_period", _seconds),
        "scale-to-zero-pod-retention-period": ("scale_to_zero_pod_retention_period", _seconds),
        "scale-down-delay": ("scale_down_delay", _seconds),
        "activator-capacity": ("activator_capacity", _number),
        "initial-scale": ("initial_scale", lambda k, v: int(_number(k, v))),
        "allow-zero-initial-scale": ("allow_zero_initial_scale", _flag),
        "min-scale": ("min_scale", lambda k, v: int(_number(k, v))),
        "max-scale": ("max_scale", lambda k, v: int(_number(k, v))),
        "max-scale-limit": ("max_scale_limit", lambda k, v: int(_number(k, v))),
    }
    if key not in simple:
        raise errors.SpecError(
            f"kpa.{key}",
            "is not a config-autoscaler key Tidal reads",
            f"known keys: {', '.join(sorted(simple))}",
        )
    name, parse = simple[key]
    return {name: parse(key, value)}


def _from_annotation(key: str, value: Any) -> dict[str, Any]:
    """One ``autoscaling.knative.dev/`` annotation → KpaSpec fields."""
    if key == "target-utilization-percentage":
        pct = _number(key, value)
        _check(1 <= pct <= 100, f"kpa.{key}", f"{pct:g} is outside [1, 100]", "use a percentage, e.g. 70")
        return {"target_utilization": pct / 100}
    if key == "class":  # PodAutoscalerClass: only the KPA has a counterpart here
        if str(value) == "kpa.autoscaling.knative.dev":
            return {}
        raise errors.SpecError(
            "kpa.class",
            f"{value!r} is not the KPA (kpa.autoscaling.knative.dev)",
            "Tidal runs Knative's KPA; for Kubernetes' HPA on CPU there is no counterpart: leave the "
            "class out, or scale on backlog with policy: numaflow",
        )
    if key == "metric":
        return {"metric": KpaMetric(str(value))}
    if key == "metric-aggregation-algorithm":
        return {"aggregation": Aggregation(str(value))}
    if key == "target":
        return {"target": _number(key, value)}
    if key == "window":
        return {"stable_window": _seconds(key, value)}
    if key == "activation-scale":
        return {"activation_scale": int(_number(key, value))}
    if key == "progress-deadline":
        return {"progress_deadline": _seconds(key, value)}
    if key in (
        "target-burst-capacity", "panic-window-percentage", "panic-threshold-percentage",
        "scale-to-zero-pod-retention-period", "scale-down-delay", "initial-scale", "min-scale", "max-scale",
    ):  # fmt: skip
        return _from_config(key, value)
    raise errors.SpecError(
        f"kpa.{key}", "is not an autoscaling.knative.dev annotation Tidal reads", "check the name"
    )


def initial_excess_burst_capacity(spec: KpaSpec) -> float:
    """EBC before the first tick: TBC itself for 0 and −1, else ``initialScale × total − TBC``."""
    tbc = spec.target_burst_capacity
    if tbc in (0, -1):
        return tbc
    return float(math.trunc(spec.initial_scale * spec.total_value - tbc))


def activator_count(spec: KpaSpec, ready: int) -> int:
    """How many activators front a revision in Proxy mode (knative.md §1.6)."""
    tbc = spec.target_burst_capacity
    if tbc == 0:
        return 2
    demand = ready * spec.total_value + max(tbc, 0)
    return max(2, math.ceil(demand / spec.activator_capacity))
