"""What a policy is shown at a tick, for hand-worked cases of the peer policies (one home for
the view both the peers' and Flink's tests build)."""

from __future__ import annotations

from tidal.controller import PolicyInput
from tidal.scaling import PressureCheck, VertexKind


def view(
    name: str,
    now: float,
    replicas: int,
    processed: float,
    pending: float,
    busy: float,
    kind: VertexKind = VertexKind.UDF,
    ready: int | None = None,
) -> PolicyInput:
    """``name`` at ``now`` with ``replicas`` (all ready unless ``ready``), ``processed`` messages
    so far, ``pending_now`` and ``busy_seconds`` so far; no window or pressure of its own."""
    return PolicyInput(
        name=name,
        kind=kind,
        now=now,
        replicas=replicas,
        ready=replicas if ready is None else ready,
        processed=processed,
        pending_now=pending,
        busy_seconds=busy,
        rate=None,
        pending=None,
        last_scaled_at=0.0,
        pressure=PressureCheck.none(),
        started_at=0.0,
        buffer_max_length=30_000,
        buffer_usage_limit=0.8,
        read_batch_size=500,
    )
