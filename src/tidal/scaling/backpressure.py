"""Back pressure from downstream buffers (Numaflow ``hasBackPressure``, ``spec/numaflow.md`` §1.7).

Every edge reachable from a vertex is checked (transitively, depth first). An edge ``from → to``
has pressure when the lookback-averaged pending of ``to``'s buffer is at least ``threshold``
(0.9) of its usable length ``bufferMaxLength × bufferUsageLimit`` — with the doc's numbers,
``50000 × 0.8 × 0.9 = 36000``. An edge with ``onFull: discardLatest`` is ignored (only that
edge: edges further down are still checked). Pressure on an edge leaving the vertex itself is
*direct*; anywhere else it is *downstream*.

The policy consults this only when it wants to scale up: direct pressure lowers the count by one,
downstream pressure holds it.

Deliberate difference: upstream reads a metrics cache filled as the scaler happens to visit each
vertex (no TTL, up to ~30 s stale, blind to vertices it skipped such as ``min == max``). Tidal's
controller samples every buffer on every tick, so pressure is judged on fresh averages for every
buffer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "BACK_PRESSURE_THRESHOLD",
    "BufferLoad",
    "Edge",
    "OnFull",
    "Pressure",
    "PressureCheck",
    "check",
]

BACK_PRESSURE_THRESHOLD = 0.9


class OnFull(StrEnum):
    RETRY_UNTIL_SUCCESS = "retryUntilSuccess"
    DISCARD_LATEST = "discardLatest"


class Pressure(StrEnum):
    NONE = "none"
    DOWNSTREAM = "downstream"
    DIRECT = "direct"


@dataclass(frozen=True, slots=True)
class Edge:
    """A pipeline edge; data flows into ``to``'s input buffer."""

    source: str
    to: str
    on_full: OnFull = OnFull.RETRY_UNTIL_SUCCESS


@dataclass(frozen=True, slots=True)
class BufferLoad:
    """A buffer's averaged pending and usable length (``maxLength × usageLimit``)."""

    pending: float
    usable_length: float

    @property
    def ratio(self) -> float:
        return self.pending / self.usable_length if self.usable_length > 0 else 0.0


@dataclass(frozen=True, slots=True)
class PressureCheck:
    level: Pressure
    buffer: str | None = None
    ratio: float | None = None
    reason: str = "no downstream buffer is over 90 % of its usable length"

    @classmethod
    def none(cls) -> PressureCheck:
        return _NO_PRESSURE


_NO_PRESSURE = PressureCheck(Pressure.NONE)


def check(
    vertex: str,
    downstream: Iterable[Edge],
    loads: Mapping[str, BufferLoad],
    threshold: float = BACK_PRESSURE_THRESHOLD,
) -> PressureCheck:
    """Is there back pressure on ``vertex``? ``downstream`` is every edge reachable from it, depth
    first (:func:`tidal.spec.graph.downstream_edges`, computed once per pipeline); ``loads`` maps a
    vertex name to its input buffer's load."""
    worst: PressureCheck = PressureCheck.none()
    for edge in downstream:
        if edge.on_full == OnFull.DISCARD_LATEST:
            continue
        load = loads.get(edge.to)
        if load is None or load.usable_length <= 0:
            continue
        ratio = load.ratio
        if ratio < threshold:
            continue
        where = f"buffer {edge.to!r} at {ratio:.0%} of its usable length (≥ {threshold:.0%})"
        if edge.source == vertex:
            return PressureCheck(Pressure.DIRECT, edge.to, ratio, f"direct back pressure: {where}")
        if worst.level == Pressure.NONE:
            worst = PressureCheck(Pressure.DOWNSTREAM, edge.to, ratio, f"downstream {where}")
    return worst
