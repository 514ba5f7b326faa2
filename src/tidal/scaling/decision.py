"""Scaling decisions as values: what to do, which rule fired, the inputs it used, and why.

Every evaluation returns a :class:`Decision`, including the ones that change nothing: a skip
("metrics not available", "cooldown 42 s < 90 s") is a decision whose ``desired`` equals
``current`` and whose ``rule`` says why. Nothing returns ``None`` and nothing raises for "no data"
(Knative's ``invalidSR`` / ``ErrNoData`` are values too). The ``reason`` is one line a person
understands: ``pending 60000 at 10000/s over 2 replicas, target 3 s → 4``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

__all__ = ["Decision", "Rule"]


class Rule(StrEnum):
    """The rule that produced a decision. Values are stable: they label metrics and events."""

    # -- changes (desired may differ from current) -------------------------------------------
    SCALE_UP = "scale-up"
    SCALE_DOWN = "scale-down"
    SCALE_TO_ZERO = "scale-to-zero"
    WAKE_ON_PENDING = "wake-on-pending"  # UDF/sink at 0 with messages in its buffer → 1
    PEEK = "peek"  # source at 0 after zeroReplicaSleepSeconds → 1
    BACK_PRESSURE_DIRECT = "back-pressure-direct"  # wanted up, direct downstream full → −1
    INTO_BOUNDS = "into-bounds"  # current outside [min, max] → clamp at once
    CRON_MIN = "cron-min"
    CRON_MAX = "cron-max"
    # -- holds and skips (desired == current) ----------------------------------------------
    STEADY = "steady"
    DISABLED = "disabled"
    NOT_RUNNING = "not-running"
    CONVERGING = "converging"
    COOLDOWN = "cooldown"
    SCALE_UP_COOLDOWN = "scale-up-cooldown"
    SCALE_DOWN_COOLDOWN = "scale-down-cooldown"
    FIXED = "fixed"  # min == max
    ZERO_WAIT = "zero-wait"
    NOT_READY = "not-ready"
    METRICS_UNAVAILABLE = "metrics-unavailable"
    BUFFER_UNAVAILABLE = "buffer-unavailable"
    RATE_LIMITED = "rate-limited"
    BACK_PRESSURE_DOWNSTREAM = "back-pressure-downstream"
    BACK_PRESSURE_AT_FLOOR = "back-pressure-at-floor"
    # -- KPA ---------------------------------------------------------------------------------
    KPA_STABLE = "kpa-stable"
    KPA_PANIC = "kpa-panic"
    KPA_NO_DATA = "kpa-no-data"
    KPA_SCALE_DOWN_DELAY = "kpa-scale-down-delay"
    KPA_ZERO_GRACE = "kpa-zero-grace"


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one evaluation of one vertex (or KPA revision).

    ``desired`` is what the actuator should apply; it equals ``current`` for every hold or skip.
    ``recommended`` is what the policy computed before steps, cooldowns and back pressure (or
    ``None`` when it got that far) — useful in dry-run mode and plots.
    """

    vertex: str
    at: float
    current: int
    desired: int
    rule: Rule
    reason: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    recommended: int | None = None

    def __post_init__(self) -> None:
        if self.desired < 0:
            raise ValueError(f"desired replicas must be >= 0, got {self.desired}")
        inputs = self.inputs
        if not isinstance(inputs, MappingProxyType):
            # Callers hand over a fresh dict; wrapping it (not copying) keeps decisions cheap.
            object.__setattr__(
                self, "inputs", MappingProxyType(inputs if isinstance(inputs, dict) else dict(inputs))
            )

    @property
    def changed(self) -> bool:
        """True when applying this decision changes the replica count."""
        return self.desired != self.current

    @property
    def delta(self) -> int:
        return self.desired - self.current

    def explain(self) -> str:
        """``vertex: 2 → 4 [scale-up] pending 60000 at 10000/s …``"""
        arrow = f"{self.current} → {self.desired}" if self.changed else f"hold {self.current}"
        return f"{self.vertex}: {arrow} [{self.rule}] {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (for the event log and ``tidal events``)."""
        return {
            "vertex": self.vertex,
            "at": self.at,
            "current": self.current,
            "desired": self.desired,
            "recommended": self.recommended,
            "rule": str(self.rule),
            "reason": self.reason,
            "inputs": dict(self.inputs),
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Decision:
        return cls(
            vertex=record["vertex"],
            at=float(record["at"]),
            current=int(record["current"]),
            desired=int(record["desired"]),
            rule=Rule(record["rule"]),
            reason=record["reason"],
            inputs=record.get("inputs", {}),
            recommended=record.get("recommended"),
        )
