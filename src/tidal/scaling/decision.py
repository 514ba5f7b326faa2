"""Scaling decisions as values: what to do, which rule fired, the inputs it used, and why.

Every evaluation returns a :class:`Decision`, including the ones that change nothing: a skip
("metrics not available", "cooldown 42 s < 90 s") is a decision whose ``desired`` equals
``current`` and whose ``rule`` says why. Nothing returns ``None`` and nothing raises for "no data"
(Knative's ``invalidSR`` / ``ErrNoData`` are values too). The ``reason`` is one line a person
understands: ``avg pending 60000 at 10000/s over 2 replicas, target 3 s → 4``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol

__all__ = ["Decision", "Inputs", "Observed", "Rule", "Text", "hold", "move"]


class Rule(StrEnum):
    """The rule that produced a decision. Values are stable: they label metrics and events."""

    # -- changes (desired may differ from current) -------------------------------------------
    SCALE_UP = "scale-up"
    SCALE_DOWN = "scale-down"
    SCALE_TO_ZERO = "scale-to-zero"
    WAKE_ON_PENDING = "wake-on-pending"  # UDF/sink at 0 with messages in its buffer → 1
    WAKE_ON_PATH = "wake-on-path"  # at 0 downstream of a vertex that just woke → 1, ahead of the messages
    PRE_SCALE = "pre-scale"  # a periodic load's next rise is one start-up away: its replicas now
    PEEK = "peek"  # source at 0 after zeroReplicaSleepSeconds → 1
    BACK_PRESSURE_DIRECT = "back-pressure-direct"  # wanted up, direct downstream full → −1
    INTO_BOUNDS = "into-bounds"  # current outside [min, max] → clamp at once
    CRON_MIN = "cron-min"
    CRON_MAX = "cron-max"
    EXTERNAL = "external"  # written from outside (the scale subresource, tidal scale)
    PAUSED = "paused"  # the pipeline paused: every vertex to 0, sources closed
    RESUMED = "resumed"  # the pipeline resumed: the replicas it had before the pause
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
    WARMING_UP = "warming-up"
    METRICS_UNAVAILABLE = "metrics-unavailable"
    BUFFER_UNAVAILABLE = "buffer-unavailable"
    METRICS_SETTLING = "metrics-settling"  # a scale-down held: the lookback still spans a metric outage
    RATE_LIMITED = "rate-limited"
    SINK_FAILING = "sink-failing"  # its sink retries writes: more replicas would not help
    BACK_PRESSURE_DOWNSTREAM = "back-pressure-downstream"
    BACK_PRESSURE_AT_FLOOR = "back-pressure-at-floor"
    # a rise that ends before a scale-up pays, held through (policy tidal): a rule of its own, so
    # the event log keeps the hold that withheld a scale-up, not only the steady one before it
    RISE_ENDS = "rise-ends"
    # -- KPA ---------------------------------------------------------------------------------
    KPA_STABLE = "kpa-stable"
    KPA_PANIC = "kpa-panic"
    KPA_NO_DATA = "kpa-no-data"
    KPA_SCALE_DOWN_DELAY = "kpa-scale-down-delay"
    KPA_ZERO_GRACE = "kpa-zero-grace"
    KPA_ACTIVATING = "kpa-activating"
    STUCK = "stuck"
    UNSTUCK = "unstuck"
    STATE_RESTORED = "state-restored"  # a restarted driver's controller resumed from its saved state
    STATE_IGNORED = "state-ignored"  # ... or could not (damaged, or the vertex's settings changed)
    RETUNED = "retuned"  # a live edit (tidal apply) changed its scale block, policy or bounds
    RESTARTED = "restarted"  # its query failed for a transient reason and resumed from its checkpoint
    REPARTITIONED = "repartitioned"  # a reduce vertex's state moved to another number of partitions
    REPARTITION_FAILED = "repartition-failed"  # ... or Spark refused: it runs on its old count
    STATE_PARTITIONS = "state-partitions"  # the partition policy's verdict (its rule in the inputs)
    SHUFFLE_PARTITIONS = "shuffle-partitions"  # a step's shuffle count followed its replicas (or why not)
    SIDE_INPUT = "side-input"  # a side input the vertex reads has a new value (not a scaling decision)
    KPA_ACTIVATION_TIMEOUT = "kpa-activation-timeout"
    # -- peers that tidal.sim compares against (not used by the runtime) ----------------------
    STATIC_PEAK = "static-peak"  # provisioned once for the peak, never changed
    DS2_RESCALE = "ds2-rescale"  # DS2 / Flink autoscaler: true processing rate → parallelism
    DS2_HOLD = "ds2-hold"  # within the utilization band, stabilizing, or no busy-time yet
    FLINK_RESCALE = "flink-rescale"  # Flink's autoscaler: capacity at target utilisation, aligned
    FLINK_HOLD = "flink-hold"  # within its bounds, collecting, stabilizing, delayed or blocked
    SPARK_BACKLOG = "spark-backlog"  # Spark dynamic allocation: pending tasks → add, ×2 a round
    SPARK_IDLE = "spark-idle"  # Spark dynamic allocation: executors idle for 60 s removed
    SPARK_HOLD = "spark-hold"


Text = str | Callable[[], str]
"""A reason: the string, or a function that renders it when somebody reads it."""
Inputs = Mapping[str, Any] | Callable[[], Mapping[str, Any]]
"""The inputs: the mapping, or a function that builds it when somebody reads it."""


class Decision:
    """The outcome of one evaluation of one vertex (or KPA revision).

    ``desired`` is what the actuator should apply; it equals ``current`` for every hold or skip.
    ``recommended`` is what the policy computed before steps, cooldowns and back pressure (or
    ``None`` when it got that far) — useful in dry-run mode and plots.

    A decision is a value: compare it, hash it, derive a new one with :meth:`replace`; do not
    assign to its attributes. ``reason`` and ``inputs`` may be handed over as functions and are
    then rendered on first read: a controller ticking 10,000 vertices a second reads few of them,
    and formatting every explanation eagerly cost more than the decisions themselves
    (``tidal bench scaling``).
    """

    __slots__ = ("_inputs", "_reason", "at", "current", "desired", "recommended", "rule", "vertex")

    vertex: str
    at: float
    current: int
    desired: int
    rule: Rule
    recommended: int | None

    def __init__(
        self,
        vertex: str,
        at: float,
        current: int,
        desired: int,
        rule: Rule,
        reason: Text,
        inputs: Inputs | None = None,
        recommended: int | None = None,
    ) -> None:
        if desired < 0:
            raise ValueError(f"desired replicas must be >= 0, got {desired}")
        # Plain slot stores: a frozen dataclass's object.__setattr__ per field tripled the cost.
        self.vertex = vertex
        self.at = at
        self.current = current
        self.desired = desired
        self.rule = rule
        self._reason = reason
        self._inputs = inputs
        self.recommended = recommended

    @property
    def reason(self) -> str:
        """One line a person understands: ``avg pending 60000 at 10000/s over 2 replicas … → 4``."""
        reason = self._reason
        if not isinstance(reason, str):
            reason = reason()
            self._reason = reason
        return reason

    @property
    def inputs(self) -> Mapping[str, Any]:
        """The numbers the rule used, read-only (``{"pending": 60000.0, "rate": 10000.0, …}``)."""
        inputs = self._inputs
        if inputs is None:
            inputs = _EMPTY
        elif callable(inputs):
            inputs = inputs()
        if not isinstance(inputs, MappingProxyType):
            inputs = MappingProxyType(inputs if isinstance(inputs, dict) else dict(inputs))
        self._inputs = inputs
        return inputs

    @property
    def changed(self) -> bool:
        """True when applying this decision changes the replica count."""
        return self.desired != self.current

    @property
    def delta(self) -> int:
        return self.desired - self.current

    def replace(self, **changes: Any) -> Decision:
        """A copy with some fields changed (``reason``/``inputs`` may again be functions)."""
        fields = {
            "vertex": self.vertex,
            "at": self.at,
            "current": self.current,
            "desired": self.desired,
            "rule": self.rule,
            "reason": self._reason,
            "inputs": self._inputs,
            "recommended": self.recommended,
        }
        unknown = changes.keys() - fields.keys()
        if unknown:
            raise TypeError(f"Decision has no field(s) {sorted(unknown)}")
        fields.update(changes)
        return Decision(**fields)  # type: ignore[arg-type]  # each field checked by name above

    def _key(self) -> tuple[Any, ...]:
        return (
            self.vertex,
            self.at,
            self.current,
            self.desired,
            self.rule,
            self.reason,
            tuple(sorted(self.inputs.items())),
            self.recommended,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.vertex, self.at, self.current, self.desired, self.rule, self.recommended))

    def __repr__(self) -> str:
        return (
            f"Decision(vertex={self.vertex!r}, at={self.at!r}, current={self.current}, "
            f"desired={self.desired}, rule={self.rule!s}, reason={self.reason!r}, "
            f"recommended={self.recommended})"
        )

    def explain(self) -> str:
        """``vertex: 2 → 4 [scale-up] avg pending 60000 at 10000/s …``"""
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
            inputs=dict(record.get("inputs") or {}),
            recommended=record.get("recommended"),
        )


_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Observed(Protocol):
    """What :func:`hold` and :func:`move` read of an observation: its vertex and replicas."""

    @property
    def vertex(self) -> str: ...

    @property
    def replicas(self) -> int: ...


def hold(
    obs: Observed,
    now: float,
    rule: Rule,
    reason: Text,
    recommended: int | None = None,
    inputs: Inputs | None = None,
) -> Decision:
    """A decision that keeps ``obs.replicas``."""
    return Decision(obs.vertex, now, obs.replicas, obs.replicas, rule, reason, inputs, recommended)


def move(
    obs: Observed,
    now: float,
    desired: int,
    rule: Rule,
    reason: Text,
    recommended: int | None = None,
    inputs: Inputs | None = None,
) -> Decision:
    """A decision that asks for ``desired`` replicas."""
    return Decision(obs.vertex, now, obs.replicas, desired, rule, reason, inputs, recommended)
