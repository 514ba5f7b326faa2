"""Knative's Pod Autoscaler (KPA) as pure, stateful values: ``spec/knative.md`` §1–2.

* :class:`~tidal.scaling.kpa_spec.KpaSpec` — the parameters (:mod:`tidal.scaling.kpa_spec`).
* :class:`KpaDecider` — ``Scale(now)``: stable (60 s) and panic (6 s) window averages of the
  revision-wide observed metric, rate limits (up ×1000, down ÷2), panic entry at 2.0 × the ready
  pods and its exit one stable window after the last over-threshold tick, no scale-down while
  panicking, activation scale, scale-down delay (max over a window) and excess burst capacity.
  "No data" is a :class:`Decision` with rule ``kpa-no-data``, and the last decision stands.
* :class:`KpaScaler` — the KPA reconciler's part: min/max/initial scale, the Active condition
  (active, activating, inactive) and the scale-to-zero gate (a revision active for less than one
  stable window goes to 1 first; then ``max(grace, retention)`` of inactivity, or grace minus the
  time the activator has been in the path; a revision still *activating* — fewer ready replicas
  than its threshold — past ``progressDeadline + 30 s`` goes to 0, "TimedOut").

Everything takes ``now`` in seconds. Differences from upstream, all deliberate:

* Upstream's decider reads the wall clock once when created (to start in panic); here creation
  takes ``now``.
* The activator probe is not modelled: Tidal's activator (the buffer wake-up) is in-process and
  always reachable, so the probe always succeeds.
* A changed ``scaleDownDelay`` takes effect (the delay window is rebuilt) — upstream keeps the old
  window until the decider is recreated (#15619).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import NamedTuple

from tidal.scaling.decision import Decision, Rule
from tidal.scaling.kpa_spec import (
    Aggregation,
    KpaMetric,
    KpaSpec,
    activator_count,
    initial_excess_burst_capacity,
)
from tidal.scaling.windows import MaxTimeWindow, TimedBuckets, WeightedBuckets

__all__ = [
    "Aggregation",
    "KpaDecider",
    "KpaMetric",
    "KpaResult",
    "KpaScaler",
    "KpaSpec",
    "activator_count",
    "initial_excess_burst_capacity",
]

TICK_SECONDS = 2.0  # the decider's tick; also the max-window granularity


class KpaResult(NamedTuple):
    """A decider tick: ``valid`` is False for "no decision" (the decision says why)."""

    decision: Decision
    excess_burst_capacity: float
    valid: bool
    stable: float = 0.0
    panic: float = 0.0
    panicking: bool = False

    @property
    def activator_in_path(self) -> bool:
        """Serve (activator out) needs desired > 0 and EBC ≥ 0; anything else is Proxy."""
        return not (self.decision.desired > 0 and self.excess_burst_capacity >= 0)


def _buckets(spec: KpaSpec, window: float) -> TimedBuckets:
    cls = WeightedBuckets if spec.aggregation == Aggregation.WEIGHTED_EXPONENTIAL else TimedBuckets
    return cls(window)


class KpaDecider:
    """One revision's (vertex's) KPA decider: record observations, then ``scale(now, ready)``."""

    def __init__(self, name: str, spec: KpaSpec, now: float, ready: int = 0) -> None:
        self.name = name
        self._spec = spec
        self._stable = _buckets(spec, spec.stable_window)
        self._panic = _buckets(spec, spec.panic_window)
        self._delay = (
            MaxTimeWindow(spec.scale_down_delay, TICK_SECONDS) if spec.scale_down_delay > 0 else None
        )
        # Start in panic when more than one replica is ready: a restarted autoscaler has no
        # history and must not scale down before it has some (Knative PR #4795).
        self._panic_time: float | None = now if ready > 1 else None
        self._max_panic_pods = ready
        self.last: KpaResult | None = None

    @property
    def spec(self) -> KpaSpec:
        return self._spec

    def update(self, spec: KpaSpec, now: float) -> None:
        """Swap the spec; windows are resized and the delay window rebuilt if it changed."""
        if spec.stable_window != self._spec.stable_window:
            self._stable.resize(now, spec.stable_window)
        if spec.panic_window != self._spec.panic_window:
            self._panic.resize(now, spec.panic_window)
        if spec.scale_down_delay != self._spec.scale_down_delay:
            self._delay = (
                MaxTimeWindow(spec.scale_down_delay, TICK_SECONDS) if spec.scale_down_delay > 0 else None
            )
        self._spec = spec

    def record(self, now: float, value: float, proxied: float = 0.0) -> None:
        """Record one observation of the metric (revision-wide total); proxied load is excluded."""
        self._stable.record(now, value - proxied)
        self._panic.record(now, value - proxied)

    def wants_poke(self, value: float) -> bool:
        """Knative's poke: at desired 0, a non-zero observation should tick the decider at once."""
        return value > 0 and self.last is not None and self.last.decision.desired == 0

    def scale(self, now: float, ready: int | None, current: int | None = None) -> KpaResult:
        """Knative ``Scale(now)``. ``ready=None`` means the pod count could not be read."""
        spec = self._spec
        current = current if current is not None else (ready or 0)
        if ready is None:
            return self._invalid(now, current, "ready replica count unavailable: no decision")
        if self._stable.is_empty(now) and spec.target_burst_capacity != -1:
            return self._invalid(now, current, "no metric data in the stable window: keep the last decision")
        r0 = ready
        r = max(1, r0)
        stable = self._stable.window_average(now)
        panic = self._panic.window_average(now)
        max_up = math.ceil(spec.max_scale_up_rate * r)
        max_down = math.floor(r / spec.max_scale_down_rate) if spec.reachable else 0
        target = spec.target_value
        dspc = math.ceil(stable / target)
        dppc = math.ceil(panic / target)
        stable_pods = min(max(dspc, max_down), max_up)
        panic_pods = min(max(dppc, max_down), max_up)
        if spec.activation_scale > 1:
            if dspc > 0 and stable_pods < spec.activation_scale:
                stable_pods = spec.activation_scale
            if dppc > 0 and panic_pods < spec.activation_scale:
                panic_pods = spec.activation_scale
        over = dppc / r >= spec.panic_threshold
        if over:
            self._panic_time = now
        elif self._panic_time is not None and self._panic_time + spec.stable_window < now:
            self._panic_time = None
            self._max_panic_pods = 0
        panicking = self._panic_time is not None
        metric = "concurrency" if spec.metric == KpaMetric.CONCURRENCY else "rps"
        if panicking:
            desired = max(stable_pods, panic_pods)
            self._max_panic_pods = max(self._max_panic_pods, desired)
            desired = self._max_panic_pods
            rule = Rule.KPA_PANIC
        else:
            desired = stable_pods
            rule = Rule.KPA_STABLE
        wanted = desired
        delayed = 0
        if self._delay is not None and spec.reachable:
            self._delay.record(now, desired)
            delayed = int(self._delay.current())
            if delayed > desired:
                rule = Rule.KPA_SCALE_DOWN_DELAY
                desired = delayed
        tbc = spec.target_burst_capacity
        if tbc == 0:
            ebc = 0.0
        elif tbc == -1:
            ebc = -1.0
        else:
            ebc = float(math.floor(r0 * spec.total_value - tbc - panic))

        # Rendered only when read (Decision.reason / .inputs): most ticks are never looked at.
        def reason() -> str:
            if panicking:
                text = (
                    f"panic: {metric} {panic:g} over {spec.panic_window:g} s / target {target:g} = "
                    f"{dppc} pods ≥ {spec.panic_threshold:g} × {r} ready; holding the high-water mark "
                    f"{wanted}"
                )
            else:
                text = (
                    f"stable: {metric} {stable:g} over {spec.stable_window:g} s / target {target:g} "
                    f"→ {wanted}"
                )
                if stable_pods != dspc:
                    text += f" (rate-limited from {dspc} to [{max_down}, {max_up}])"
            if delayed > wanted:
                text += f"; scale-down delay {spec.scale_down_delay:g} s keeps the window max {delayed}"
            return text

        def inputs() -> dict[str, object]:
            return {
                "metric": metric,
                "stable": stable,
                "panic": panic,
                "target": target,
                "ready": r0,
                "maxScaleUp": max_up,
                "maxScaleDown": max_down,
                "excessBurstCapacity": ebc,
            }

        decision = Decision(self.name, now, current, desired, rule, reason, inputs, desired)
        result = KpaResult(decision, ebc, True, stable, panic, panicking)
        self.last = result
        return result

    def _invalid(self, now: float, current: int, reason: str) -> KpaResult:
        ebc = self.last.excess_burst_capacity if self.last else initial_excess_burst_capacity(self._spec)
        decision = Decision(self.name, now, current, current, Rule.KPA_NO_DATA, reason, {})
        return KpaResult(decision, ebc, False)


class _Phase(StrEnum):
    ACTIVE = "active"
    ACTIVATING = "activating"
    INACTIVE = "inactive"


@dataclass(slots=True)
class _GateState:
    phase: _Phase = _Phase.ACTIVE
    since: float = 0.0
    proxy_since: float | None = None
    activating_since: float | None = None
    initialized: bool = False
    history: list[str] = field(default_factory=list)


class KpaScaler:
    """Decider plus the KPA reconciler: bounds, initial scale and the scale-to-zero gate.

    ``decide(now, ready, current)`` returns the replica count to apply, as a :class:`Decision`.
    """

    def __init__(self, name: str, spec: KpaSpec, now: float, ready: int = 0) -> None:
        self.decider = KpaDecider(name, spec, now, ready)
        self._state = _GateState(since=now)

    @property
    def spec(self) -> KpaSpec:
        return self.decider.spec

    def record(self, now: float, value: float, proxied: float = 0.0) -> None:
        self.decider.record(now, value, proxied)
        if value > 0 and self._state.phase == _Phase.INACTIVE:
            # Traffic for an inactive revision: it is activating again.
            self._state = replace(self._state, phase=_Phase.ACTIVE, since=now, proxy_since=None)

    def decide(self, now: float, ready: int | None, current: int) -> Decision:
        spec = self.spec
        result = self.decider.scale(now, ready, current)
        if not result.valid:
            return result.decision
        d = result.decision
        want = d.desired
        state = self._state
        low = 0 if not spec.reachable else spec.min_scale
        if not state.initialized and spec.reachable and spec.initial_scale > 1:
            low = max(low, spec.initial_scale)
        threshold = max(low, 1)
        if (ready or 0) >= threshold:
            state.initialized = True
        bounded = max(want, low)
        if spec.max_scale:
            bounded = min(bounded, spec.max_scale)
        max_scale = spec.max_scale or "∞"
        if result.activator_in_path:
            if state.proxy_since is None:
                state.proxy_since = now
        else:
            state.proxy_since = None
        # The Active condition: fewer ready than the threshold is "activating" (Knative's Queued),
        # unless the revision is inactive and nothing is wanted.
        if (ready or 0) < threshold and not (state.phase == _Phase.INACTIVE and bounded <= 0):
            if state.phase != _Phase.ACTIVATING:
                state.phase, state.activating_since = _Phase.ACTIVATING, now
        elif state.phase == _Phase.ACTIVATING:
            state.phase, state.since, state.activating_since = _Phase.ACTIVE, now, None
        if bounded > 0:
            if state.phase == _Phase.INACTIVE:
                state.phase, state.since = _Phase.ACTIVE, now
            if bounded == want:
                return d
            return d.replace(
                desired=bounded,
                reason=lambda: f"{d.reason} (bounded to {bounded} by min {low}/max {max_scale})",
            )
        # bounded == 0: the scale-to-zero gate
        if not spec.enable_scale_to_zero:
            return d.replace(desired=1, reason=lambda: d.reason + "; scale to zero disabled: keep 1")
        if state.phase == _Phase.ACTIVATING:
            activating_for = now - (state.activating_since if state.activating_since is not None else now)
            timeout = spec.activation_timeout
            if activating_for >= timeout:
                state.phase, state.since, state.activating_since = _Phase.INACTIVE, now, None
                return d.replace(
                    desired=0,
                    rule=Rule.KPA_ACTIVATION_TIMEOUT,
                    reason=lambda: (
                        d.reason + f"; activating {activating_for:.0f} s ≥ progress deadline + 30 s "
                        f"({timeout:g} s) with {ready or 0} ready: 0 (TimedOut)"
                    ),
                )
            return d.replace(
                desired=current,
                rule=Rule.KPA_ACTIVATING,
                reason=lambda: (
                    d.reason + f"; activating for {activating_for:.0f} s ({ready or 0} ready): "
                    f"wait up to {timeout:g} s before 0"
                ),
            )
        if state.phase == _Phase.ACTIVE:
            active_for = now - state.since
            if active_for >= spec.stable_window:
                state.phase, state.since = _Phase.INACTIVE, now
                if state.proxy_since is None:
                    state.proxy_since = now
                return d.replace(
                    desired=current,
                    rule=Rule.KPA_ZERO_GRACE,
                    reason=lambda: (
                        d.reason + "; now inactive: activator in the path, zero after the grace period"
                    ),
                )
            return d.replace(
                desired=1,
                rule=Rule.KPA_ZERO_GRACE,
                reason=lambda: (
                    d.reason + f"; active only {active_for:.0f} s < stable window: keep 1 before 0"
                ),
            )
        inactive_for = now - state.since
        retention = spec.scale_to_zero_pod_retention_period if spec.reachable else 0.0
        grace = spec.scale_to_zero_grace_period
        if inactive_for >= max(grace, retention):
            return d.replace(
                desired=0,
                rule=Rule.SCALE_TO_ZERO,
                reason=lambda: d.reason + f"; inactive {inactive_for:.0f} s: 0",
            )
        if retention > 0 and inactive_for < retention:
            return d.replace(
                desired=current,
                rule=Rule.KPA_ZERO_GRACE,
                reason=lambda: (
                    d.reason + f"; pod retention {retention:g} s: inactive only {inactive_for:.0f} s"
                ),
            )
        proxy_for = now - state.proxy_since if state.proxy_since is not None else 0.0
        if grace - proxy_for <= 0:
            return d.replace(
                desired=0,
                rule=Rule.SCALE_TO_ZERO,
                reason=lambda: d.reason + f"; activator in path {proxy_for:.0f} s ≥ grace: 0",
            )
        return d.replace(
            desired=current,
            rule=Rule.KPA_ZERO_GRACE,
            reason=lambda: d.reason + f"; grace period: {grace - proxy_for:.0f} s left before 0",
        )
