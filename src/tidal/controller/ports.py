"""What the controller talks to: a probe that samples vertices, an actuator that applies replicas,
and a recorder for its decisions. Small Protocols owned by the controller, each with a real
implementation in the runtime (:class:`~tidal.controller.probe.StoreProbe`, the control store,
:class:`~tidal.controller.events.EventLog`) and another in the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from tidal.scaling import Decision

__all__ = ["Actuator", "DecisionRecorder", "Probe", "ProbeSample"]


@dataclass(frozen=True, slots=True)
class ProbeSample:
    """One vertex at one instant. ``pending`` None = not available (e.g. ``pending()`` raised)."""

    processed: float  # cumulative messages processed (all replicas)
    pending: float | None
    replicas: int
    ready: int | None = None  # None = same as replicas
    busy_seconds: float | None = None  # cumulative replica-seconds spent working, if measured
    # Messages each running replica read so far, by name (Numaflow's getPodReadCounts); None where
    # the runtime does not count per replica. A MonoVertex's rater reads them per pod, as upstream.
    read_counts: Mapping[str, float] | None = None
    sink_retried: float | None = None  # cumulative message writes its sink retried; None: not counted
    throttled_at: float | None = None  # when its rate limit last held a micro-batch back; None: never
    tasks: float | None = None  # cumulative tasks its micro-batches ran; None: not counted
    # The most replicas the cluster can run for it at all: its share of the most cores the
    # executor bounds allow (None: no such limit known, as in local mode and the simulator).
    attainable: int | None = None
    # How old ``processed + pending`` are together, in seconds: a source's pending comes from its
    # reader's last report (made when a micro-batch is planned), so its arrivals are as of then.
    age: float = 0.0


class Probe(Protocol):
    def sample(self, vertex: str) -> ProbeSample: ...


class Actuator(Protocol):
    def set_replicas(self, vertex: str, replicas: int) -> object: ...


class DecisionRecorder(Protocol):
    """Where decisions go: the run's :class:`~tidal.controller.EventLog`, or the simulator's."""

    def record(self, decision: Decision) -> bool: ...
