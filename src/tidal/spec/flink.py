"""``controller.flink:`` — ``policy: flink``'s options, under the names Flink's docs give them.

A Flink user tunes the operator's autoscaler with ``job.autoscaler.*`` keys; the same keys tune
``policy: flink`` here, with or without the ``job.autoscaler.`` prefix, durations as Flink writes
them (``30 s``, ``5 min``, ``1h``, ``500ms``) or as numbers of seconds::

    controller:
      flink:
        job.autoscaler.utilization.target: 0.5
        job.autoscaler.metrics.window: 30 s
        catch-up.duration: 1 min

What a key is not given keeps Tidal's default (:class:`~tidal.scaling.flink.FlinkOptions`, which
says where those differ from Flink's and why). An unknown key, or a value of the wrong kind, is
refused at load, naming the key and the fix.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from tidal.scaling.durations import seconds
from tidal.scaling.flink import FlinkOptions
from tidal.scaling.flink_align import AlignmentMode

__all__ = ["KEYS", "PREFIX", "flink_options"]

PREFIX = "job.autoscaler."
_FIELDS = {f.name: str(f.type) for f in dataclasses.fields(FlinkOptions)}
# The options Flink takes as durations (the rest are ratios, counts, switches or a mode).
_DURATIONS = frozenset({
    "metrics_window", "stabilization_interval", "catch_up_duration", "restart_time",
    "restart_time_tracking_limit", "scale_down_interval", "backlog_processing_lag_threshold",
    "observed_true_processing_rate_lag_threshold",
})  # fmt: skip
# Flink's unit names, as the Numaflow ones :func:`~tidal.scaling.durations.seconds` reads.
_UNITS = {
    "ms": "ms", "milli": "ms", "millis": "ms", "s": "s", "sec": "s", "secs": "s", "second": "s",
    "seconds": "s", "m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
    "h": "h", "hour": "h", "hours": "h",
}  # fmt: skip
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


# Each field's Flink key: Flink separates levels with dots and words within a level with
# dashes, and the field names lose both.
KEYS: dict[str, str] = {
    "utilization_target": "utilization.target",
    "target_utilization_boundary": "target.utilization.boundary",
    "utilization_max": "utilization.max",
    "utilization_min": "utilization.min",
    "metrics_window": "metrics.window",
    "stabilization_interval": "stabilization.interval",
    "catch_up_duration": "catch-up.duration",
    "restart_time": "restart.time",
    "restart_time_tracking_enabled": "restart.time-tracking.enabled",
    "restart_time_tracking_limit": "restart.time-tracking.limit",
    "scale_down_interval": "scale-down.interval",
    "scale_down_max_factor": "scale-down.max-factor",
    "scale_up_max_factor": "scale-up.max-factor",
    "vertex_min_parallelism": "vertex.min-parallelism",
    "vertex_max_parallelism": "vertex.max-parallelism",
    "backlog_processing_lag_threshold": "backlog-processing.lag-threshold",
    "scaling_effectiveness_detection_enabled": "scaling.effectiveness.detection.enabled",
    "scaling_effectiveness_threshold": "scaling.effectiveness.threshold",
    "scaling_parallelism_alignment_mode": "scaling.parallelism-alignment.mode",
    "observed_true_processing_rate_lag_threshold": "observed-true-processing-rate.lag-threshold",
    "observed_true_processing_rate_switch_threshold": "observed-true-processing-rate.switch-threshold",
    "observed_true_processing_rate_min_observations": "observed-true-processing-rate.min-observations",
}


# Keys Flink deprecated but still reads, as it does.
_DEPRECATED = {"target.utilization": "utilization_target", "scale-up.grace-period": "scale_down_interval"}
_BY_KEY = {key: name for name, key in KEYS.items()} | _DEPRECATED


def _duration(key: str, value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _DURATION.fullmatch(str(value).strip().lower())
    if match is None or match.group(2) not in {"", *_UNITS}:
        raise ValueError(
            f"controller.flink.{key}: {value!r} is not a duration: write 30 s, 5 min, 1h or seconds"
        )
    return seconds(match.group(1) + _UNITS.get(match.group(2), "s"))


def _value(key: str, field: str, value: Any) -> Any:
    kind = _FIELDS[field]
    if field in _DURATIONS:
        return _duration(key, value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"controller.flink.{key}: {value!r} is not true or false")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"controller.flink.{key}: {value!r} is not a whole number")
        return value
    if kind == "AlignmentMode":
        modes = [m.value for m in AlignmentMode]
        if str(value).upper() not in modes:
            raise ValueError(f"controller.flink.{key}: {value!r} is not one of {', '.join(modes)}")
        return AlignmentMode(str(value).upper())
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"controller.flink.{key}: {value!r} is not a number")
    return float(value)


def flink_options(settings: Mapping[str, Any]) -> FlinkOptions:
    """:class:`FlinkOptions` from ``job.autoscaler.*`` keys (the prefix optional), Tidal's defaults
    for the rest; a clear ``ValueError`` for an unknown key or a wrong value."""
    given: dict[str, Any] = {}
    for raw, value in settings.items():
        key = raw[len(PREFIX) :] if raw.startswith(PREFIX) else raw
        field = _BY_KEY.get(key)
        if field is None:
            close = [k for k in _BY_KEY if k.split(".")[-1] == key.split(".")[-1]]
            hint = f"did you mean {PREFIX}{close[0]}? " if close else ""
            raise ValueError(
                f"controller.flink: unknown option {raw!r}; {hint}the options are "
                + ", ".join(PREFIX + k for k in KEYS.values())
            )
        given[field] = _value(raw, field, value)
    try:
        return FlinkOptions(**given)
    except ValueError as exc:
        raise ValueError(f"controller.flink: {exc}") from exc
