"""Builders for scaling tests: one observation with sensible defaults, overridden per case."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tidal.scaling import BufferInfo, PartitionMetrics, VertexKind, VertexObservation

NOW = 10_000.0


def source(**kw) -> VertexObservation:
    base = VertexObservation(
        vertex="in",
        kind=VertexKind.SOURCE,
        replicas=2,
        ready_replicas=2,
        last_scaled_at=0.0,
        partitions=(PartitionMetrics("in", rate=10000.0, pending=60000.0),),
    )
    return replace(base, **kw)


def udf(
    pending: float = 1000.0, rate: float = 100.0, buffer_pending: int | None = None, **kw
) -> VertexObservation:
    base = VertexObservation(
        vertex="map",
        kind=VertexKind.UDF,
        replicas=2,
        ready_replicas=2,
        last_scaled_at=0.0,
        partitions=(PartitionMetrics("map-0", rate=rate, pending=pending),),
        buffers=(
            BufferInfo("map-0", 30000, 0.8, int(pending) if buffer_pending is None else buffer_pending),
        ),
    )
    return replace(base, **kw)


@pytest.fixture
def now() -> float:
    return NOW
