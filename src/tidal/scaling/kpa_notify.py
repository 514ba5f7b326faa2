"""When the KPA's reconciler hears from the autoscaler, and what it does then, pure
(``pkg/autoscaler/scaling/multiscaler.go``, ``pkg/reconciler/autoscaling/kpa/kpa.go``).

Knative's multiscaler runs a decider per revision every tick, but informs the KPA reconciler
only when the tick changed something the reconciler acts on (``updateLatestScale``): the desired
scale, or the **sign** of the excess burst capacity (``sameSign``: 0 counts as positive), which is
what moves the activator into or out of the path. The reconciler then picks the serverless
service's mode (``Serve`` when it wants replicas and the EBC is ≥ 0, else ``Proxy``; an inactive
revision whose scale is unknown stays in ``Proxy``) and reports the desired scale, keeping its
last known one when the autoscaler answers "unknown" (-1) right after a restart
(``computeStatus``).

The request path's policy (:mod:`tidal.controller.request_policy`) re-points the activator only
when informed, or when the ready receivers changed (what the reconciler's endpoint watch does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "SCALE_UNKNOWN",
    "DeciderStatus",
    "SksMode",
    "reported_desired_scale",
    "same_sign",
    "sks_mode",
    "update_latest_scale",
]

SCALE_UNKNOWN = -1  # a decider created and not yet ticked, or an autoscaler just restarted
_INT32_SIGN = 1 << 31


def same_sign(a: int, b: int) -> bool:
    """``sameSign``: both negative or both ≥ 0, as int32 sign bits (0 is positive)."""
    return ((a & _INT32_SIGN) ^ (b & _INT32_SIGN)) == 0


@dataclass(frozen=True, slots=True)
class DeciderStatus:
    """``DeciderStatus``: what the last tick decided (``-1``: nothing yet) and its EBC."""

    desired_scale: int = SCALE_UNKNOWN
    excess_burst_capacity: int = 0


def update_latest_scale(status: DeciderStatus, desired: int, ebc: float) -> tuple[DeciderStatus, bool]:
    """``updateLatestScale``: the new status, and whether to inform the reconciler."""
    ebc_int = math.floor(ebc)
    inform = status.desired_scale != desired or not same_sign(status.excess_burst_capacity, ebc_int)
    return DeciderStatus(desired, ebc_int), inform


class SksMode(StrEnum):
    PROXY = "Proxy"  # the activator is in the path
    SERVE = "Serve"  # requests go to the replicas directly


def sks_mode(want: int, ebc: int, inactive: bool) -> SksMode:
    """The KPA reconciler's choice of mode for the want it applied and the decider's EBC."""
    if want == SCALE_UNKNOWN and inactive:
        return SksMode.PROXY
    if want > 0 and ebc >= 0:
        return SksMode.SERVE
    return SksMode.PROXY


def reported_desired_scale(previous: int | None, want: int) -> int:
    """``computeStatus``: the desired scale to report; an unknown want does not replace a known
    one (the autoscaler just restarted and has no metrics yet)."""
    if want == SCALE_UNKNOWN and previous is not None and previous >= 0:
        return previous
    return want
