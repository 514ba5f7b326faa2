"""A reduce vertex's state partitions through the control API: what a request may ask, and why not.

``GET /pipelines/{p}/vertices/{v}/partitions`` shows a vertex's state partitions;
``PATCH`` (or ``PUT``) with ``{"spec": {"partitions": N}}`` moves its state to ``N`` partitions
while the pipeline runs (:mod:`tidal.spark.run.repartition`). A move stops the vertex's query for
seconds, so a request that cannot succeed is refused before anything stops, each refusal naming
the value, the allowed range and the fix:

- ``N`` not a whole number ≥ 1 (422): state needs at least one partition;
- ``N`` above the cores the run can have (422): in local mode ``local[K]``'s ``K``; on a cluster
  manager ``cluster.maxExecutors × cluster.executorCores``. More partitions than cores only
  queue their tasks, and every partition costs a state store instance per batch;
- ``N`` equal to the current count (409): Spark itself refuses that as a no-op;
- the vertex not a reduce vertex (422): only a reduce vertex keeps state in partitions;
- a move of the vertex in progress, or one that failed less than the back-off ago (409).

Pure: the server parses, the run (:mod:`tidal.spark.run.operations`) applies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tidal.errors import ApiError

__all__ = ["PartitionsView", "check_partitions", "partitions_from_body", "partitions_object"]


@dataclass(frozen=True, slots=True)
class PartitionsView:
    """What the run knows of one vertex's state partitions, to show or to check a request against."""

    pipeline: str
    vertex: str
    reduce: bool  # only a reduce vertex has state partitions
    partitions: int  # the count its query runs with (its checkpoint's once a batch committed)
    cores: int  # the most cores the run can have: the ceiling of a request
    where: str  # where ``cores`` comes from, for a refusal's message
    moving: bool = False  # a move of this vertex is in progress
    retry_in: float = 0.0  # seconds before a move may follow a failed one


def partitions_object(view: PartitionsView) -> dict[str, Any]:
    """The answer to a read: Kubernetes-shaped, as the Scale is."""
    return {
        "kind": "StatePartitions",
        "apiVersion": "tidal.dev/v1",
        "metadata": {"name": view.vertex, "namespace": view.pipeline},
        "spec": {"partitions": view.partitions if view.reduce else None},
        "status": {"reduce": view.reduce, "maxPartitions": view.cores, "moving": view.moving},
    }


def partitions_from_body(body: bytes) -> int:
    """The count a ``PUT``/``PATCH`` asks for: ``{"spec": {"partitions": N}}``."""
    try:
        data = json.loads(body.decode("utf-8") if body else "")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(
            400, "BadRequest", f'the body is not JSON ({exc}); send e.g. {{"spec": {{"partitions": 4}}}}'
        ) from None
    spec = data.get("spec") if isinstance(data, dict) else None
    if not isinstance(spec, dict) or "partitions" not in spec:
        raise ApiError(422, "Invalid", 'spec.partitions: missing; send {"spec": {"partitions": 4}}')
    value = spec["partitions"]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(
            422,
            "Invalid",
            f"spec.partitions: {json.dumps(value)} is not a whole number; send an integer >= 1",
        )
    return value


def check_partitions(view: PartitionsView, partitions: int) -> None:
    """Refuse a move that cannot or need not happen, naming why and the fix (see the module)."""
    if not view.reduce:
        raise ApiError(
            422, "Invalid",
            f"{view.vertex} is not a reduce vertex: only a reduce vertex keeps its windows' state in "
            f"partitions (scale its replicas instead: tidal scale --replicas)",
        )  # fmt: skip
    if partitions < 1:
        raise ApiError(
            422,
            "Invalid",
            f"spec.partitions: {partitions}; a reduce vertex's state needs at least 1 partition",
        )
    if partitions > view.cores:
        raise ApiError(
            422, "Invalid",
            f"spec.partitions: {partitions} is more than the {view.cores} cores the run can have "
            f"({view.where}); ask for 1..{view.cores}, or give the run more cores",
        )  # fmt: skip
    if partitions == view.partitions:
        raise ApiError(
            409, "Conflict", f"{view.vertex}'s state is already in {partitions} partitions: nothing to move"
        )
    if view.moving:
        raise ApiError(
            409, "Conflict", f"{view.vertex}'s state is being moved now: wait for that move to end"
        )
    if view.retry_in > 0:
        raise ApiError(
            409, "Conflict",
            f"{view.vertex}'s last move failed (tidal events says why); the next may start in "
            f"{view.retry_in:.0f} s",
        )  # fmt: skip
