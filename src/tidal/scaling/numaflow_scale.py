"""A vertex's ``scale:`` block as Numaflow reads it: names, defaults, validation, normalisation.

:class:`NumaflowScale` is the one validator of these fields (the spec layer builds it and never
re-declares a default). :func:`normalise_scale` reproduces what upstream's getters do with
values its validator lets through (``spec/numaflow.md`` §2), returning the notices the caller
logs, so a pipeline written for Numaflow loads with the same meaning:

* ``lookbackSeconds`` above 600 is capped at 600 (``MaxLookbackSeconds``);
* the deprecated ``replicasPerScale`` sets both step sizes when ``replicasPerScaleUp`` /
  ``replicasPerScaleDown`` are absent;
* a negative ``min`` reads as 0 (``GetMinReplicas``): a MonoVertex without cron gets past
  upstream's validator with one; a pipeline vertex does not (``validateVertex`` refuses it, and
  so does :mod:`tidal.spec.validate`);
* a cron window whose bounds fall outside the base ``[min, max]`` is accepted with the bounds
  that take effect: the window's replace the base bounds (``EffectiveScaleBoundsAt``) and the
  vertex controller then clamps the replicas to the base bounds (``CalculateReplicas``), so the
  effective window is the window clamped into ``[min, max]`` (Numaflow #3632).

What upstream's validator refuses is still refused (``max`` below ``min``, a window whose own
``max`` is below its ``min``, negative window bounds).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from tidal import errors
from tidal.scaling.cron import CronSpec
from tidal.scaling.rates import MAX_LOOKBACK_SECONDS

__all__ = ["NumaflowScale", "normalise_scale"]


_check = errors.require


@dataclass(frozen=True, slots=True)
class NumaflowScale:
    """A vertex's ``scale:`` block with Numaflow's names (in snake case) and defaults (§2).

    Invalid values raise :class:`tidal.errors.SpecError` naming the field, e.g.
    ``scale.max: 1 is below min 3 (raise max or lower min)``.
    """

    disabled: bool = False
    min: int = 0
    max: int = 50
    lookback_seconds: float = 120.0
    scale_up_cooldown_seconds: float = 90.0
    scale_down_cooldown_seconds: float = 90.0
    zero_replica_sleep_seconds: float = 120.0
    target_processing_seconds: float = 20.0
    target_buffer_availability: float = 50.0
    replicas_per_scale_up: int = 2
    replicas_per_scale_down: int = 2
    cron: CronSpec | None = None

    def __post_init__(self) -> None:
        _check(self.min >= 0, "scale.min", f"{self.min} is negative", "use 0 or more")
        _check(
            self.max >= self.min,
            "scale.max",
            f"{self.max} is below min {self.min}",
            "raise max or lower min",
        )
        _check(
            0 < self.lookback_seconds <= MAX_LOOKBACK_SECONDS,
            "scale.lookbackSeconds",
            f"{self.lookback_seconds} is outside (0, {MAX_LOOKBACK_SECONDS:.0f}]",
            "use a value from 1 to 600 seconds",
        )
        for name, value in (
            ("scaleUpCooldownSeconds", self.scale_up_cooldown_seconds),
            ("scaleDownCooldownSeconds", self.scale_down_cooldown_seconds),
            ("zeroReplicaSleepSeconds", self.zero_replica_sleep_seconds),
        ):
            _check(value >= 0, f"scale.{name}", f"{value} is negative", "use 0 or more seconds")
        _check(
            self.target_processing_seconds > 0,
            "scale.targetProcessingSeconds",
            f"{self.target_processing_seconds} must be > 0",
            "use the seconds within which pending messages should be processed, e.g. 20",
        )
        _check(
            0 < self.target_buffer_availability <= 100,
            "scale.targetBufferAvailability",
            f"{self.target_buffer_availability} is outside (0, 100]",
            "use a percentage of bufferMaxLength, e.g. 50",
        )
        for name, step in (
            ("replicasPerScaleUp", self.replicas_per_scale_up),
            ("replicasPerScaleDown", self.replicas_per_scale_down),
        ):
            _check(step >= 1, f"scale.{name}", f"{step} is below 1", "use 1 or more replicas per step")
        if self.cron is not None:
            for i, window in enumerate(self.cron.schedules):
                path = f"scale.cron.schedules[{i}]"
                _check(window.min >= 0, f"{path}.min", f"{window.min} is negative", "use 0 or more")
                _check(
                    window.max >= window.min,
                    f"{path}.max",
                    f"{window.max} is below min {window.min}",
                    "raise max or lower min",
                )
                _check(
                    self.min <= window.min and window.max <= self.max,
                    path,
                    f"[{window.min}, {window.max}] is outside the base bounds [{self.min}, {self.max}]",
                    "widen scale.min/scale.max: the base bounds always win (Numaflow #3632)",
                )

    @property
    def fixed(self) -> bool:
        return self.min == self.max

    @property
    def shortest_cooldown(self) -> float:
        """The global cooldown (step 3): no decision at all within the shorter of the two."""
        up, down = self.scale_up_cooldown_seconds, self.scale_down_cooldown_seconds
        return up if up < down else down


_FIELDS = frozenset(f.name for f in dataclasses.fields(NumaflowScale))
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(NumaflowScale)}


def _effective_cron(cron: CronSpec, fields: Mapping[str, object], notices: list[str]) -> CronSpec:
    """Each window's bounds as they take effect: clamped into the base ``[min, max]``."""
    base_min, base_max = fields.get("min", _DEFAULTS["min"]), fields.get("max", _DEFAULTS["max"])
    if not (isinstance(base_min, int) and isinstance(base_max, int)) or base_min > base_max:
        return cron  # NumaflowScale refuses these bounds with its own message
    windows = []
    for i, w in enumerate(cron.schedules):
        if w.min < 0 or w.max < w.min or (base_min <= w.min and w.max <= base_max):
            windows.append(w)  # inside the bounds, or refused by NumaflowScale as upstream does
            continue
        low, high = min(max(w.min, base_min), base_max), max(min(w.max, base_max), base_min)
        notices.append(
            f"scale.cron.schedules[{i}]: [{w.min}, {w.max}] is outside the base bounds "
            f"[{base_min}, {base_max}]: [{low}, {high}] takes effect, as Numaflow's controller "
            "clamps the replicas to the base bounds (widen scale.min/scale.max for more)"
        )
        windows.append(dataclasses.replace(w, min=low, max=high))
    return dataclasses.replace(cron, schedules=tuple(windows))


def normalise_scale(
    given: Mapping[str, object], replicas_per_scale: int | None = None
) -> tuple[NumaflowScale, list[str]]:
    """Build a :class:`NumaflowScale` from the fields a user set (absent ones take the defaults),
    after upstream's getters normalised them; returns the scale and one notice per change.

    >>> scale, notices = normalise_scale({"lookback_seconds": 900}, replicas_per_scale=4)
    >>> scale.lookback_seconds, scale.replicas_per_scale_up, scale.replicas_per_scale_down
    (600.0, 4, 4)
    >>> notices[0]
    'scale.lookbackSeconds: 900 is above 600: capped at 600 as Numaflow does'
    """
    fields = {k: v for k, v in given.items() if v is not None}
    unknown = set(fields) - _FIELDS
    if unknown:
        raise TypeError(f"not NumaflowScale fields: {sorted(unknown)}")
    notices: list[str] = []
    low = fields.get("min")
    if isinstance(low, int) and low < 0:
        fields["min"] = 0
        notices.append(f"scale.min: {low} is negative: read as 0, as Numaflow's GetMinReplicas does")
    cron = fields.get("cron")
    if isinstance(cron, CronSpec):
        fields["cron"] = _effective_cron(cron, fields, notices)
    lookback = fields.get("lookback_seconds")
    if isinstance(lookback, int | float) and lookback > MAX_LOOKBACK_SECONDS:
        fields["lookback_seconds"] = MAX_LOOKBACK_SECONDS
        notices.append(
            f"scale.lookbackSeconds: {lookback:g} is above {MAX_LOOKBACK_SECONDS:.0f}: "
            f"capped at {MAX_LOOKBACK_SECONDS:.0f} as Numaflow does"
        )
    if replicas_per_scale is not None:
        for name, key in (
            ("replicas_per_scale_up", "replicasPerScaleUp"),
            ("replicas_per_scale_down", "replicasPerScaleDown"),
        ):
            if name not in fields:
                fields[name] = replicas_per_scale
                notices.append(
                    f"scale.replicasPerScale (deprecated): {replicas_per_scale} used for {key}, "
                    f"which is not set (write {key} instead)"
                )
    return NumaflowScale(**fields), notices  # type: ignore[arg-type]
