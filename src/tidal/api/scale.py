"""The scale subresource: a vertex's replicas as Kubernetes' ``autoscaling/v1`` ``Scale``.

Numaflow's ``Vertex`` has the scale subresource (``specReplicasPath: .spec.replicas``,
``statusReplicasPath: .status.replicas``, ``labelSelectorPath: .status.selector``), so
``kubectl scale vtx my-pipeline-in --replicas 3``, an HPA or a VPA can read and set a vertex's
replicas while the vertex controller reconciles pods to them. Tidal serves the same object for
every vertex of a running pipeline (:mod:`tidal.api.server`):

- ``spec.replicas``: what the vertex is told to run (the control record the readers consult);
- ``status.replicas``: what ran, the replicas of its last micro-batch (Kubernetes: the pods);
- ``status.selector``: labels naming the vertex, as a label selector string;
- ``metadata.resourceVersion``: bumps at every change of ``spec.replicas``; a write that carries
  an older one is refused (409), as Kubernetes' optimistic concurrency does, and a write
  without one simply wins (``kubectl scale`` sends none).

A write is parsed here (:func:`replicas_from_body`) for the three ways a Kubernetes client sends
one: ``PUT`` of a whole ``Scale``, ``PATCH`` with a JSON merge patch (or a strategic merge patch,
which for this object is the same) and ``PATCH`` with a JSON patch. Bad input is an
:class:`ApiError` with the HTTP status, Kubernetes' ``reason`` and a message that names the field
and the fix. Pure: the server does the I/O, the run applies the write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tidal.errors import ApiError

__all__ = [
    "ApiError",
    "ScaleView",
    "check_bounds",
    "replicas_from_body",
    "scale_object",
    "selector",
    "status",
]

API_GROUP = "tidal.dev"
API_VERSION = "v1"


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """Kubernetes' ``Status`` object, the body of every error (and of a few successes)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def selector(pipeline: str, vertex: str) -> str:
    """The label selector of a vertex's replicas, as ``status.selector`` carries it."""
    return f"tidal.dev/pipeline={pipeline},tidal.dev/vertex={vertex}"


@dataclass(frozen=True, slots=True)
class ScaleView:
    """What the run knows of one vertex's scale, to show or to check a write against."""

    pipeline: str
    vertex: str
    replicas: int  # spec: what the vertex is told to run
    running: int  # status: the replicas of its last micro-batch
    version: int  # bumps at every change of ``replicas``
    low: int  # scale.min (what a write may not go below)
    high: int  # scale.max
    autoscaling: bool  # False with scale.disabled: a write then stays until the next one
    head: str | None = None  # a chain's follower: the head whose query (and replicas) it runs in


def scale_object(view: ScaleView) -> dict[str, Any]:
    """``view`` as Kubernetes' ``autoscaling/v1`` ``Scale``, with Tidal's own facts in
    annotations (the bounds a write must respect, whether the autoscaler will move it)."""
    annotations = {
        "tidal.dev/min": str(view.low),
        "tidal.dev/max": str(view.high),
        "tidal.dev/autoscaling": "enabled" if view.autoscaling else "disabled",
    }
    if view.head is not None:
        annotations["tidal.dev/chained-into"] = view.head
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": view.vertex,
            "namespace": view.pipeline,
            "resourceVersion": str(view.version),
            "annotations": annotations,
        },
        "spec": {"replicas": view.replicas},
        "status": {"replicas": view.running, "selector": selector(view.pipeline, view.vertex)},
    }


def _json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8") if body else "")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(
            400, "BadRequest", f'the body is not JSON ({exc}); send e.g. {{"spec": {{"replicas": 3}}}}'
        ) from None


def _replicas(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(
            422, "Invalid", f"{where}: {json.dumps(value)} is not a whole number of replicas; send an integer"
        )
    if value < 0:
        raise ApiError(422, "Invalid", f"{where}: {value} is negative; replicas must be >= 0")
    return value


def replicas_from_body(method: str, content_type: str, body: bytes) -> tuple[int, str | None]:
    """The replicas a ``PUT`` or ``PATCH`` of a ``Scale`` asks for, and the ``resourceVersion``
    it carries (None: none). ``content_type`` picks the patch format, as in Kubernetes."""
    kind = content_type.split(";", 1)[0].strip().lower()
    data = _json(body)
    if method == "PATCH" and kind == "application/json-patch+json":
        if not isinstance(data, list):
            raise ApiError(400, "BadRequest", "a JSON patch is a list of operations, e.g. "
                           '[{"op": "replace", "path": "/spec/replicas", "value": 3}]')  # fmt: skip
        found: int | None = None
        for k, op in enumerate(data):
            if (
                not isinstance(op, dict)
                or op.get("path") != "/spec/replicas"
                or op.get("op") not in ("replace", "add")
            ):
                raise ApiError(
                    422,
                    "Invalid",
                    f"operation {k}: only replace (or add) of /spec/replicas can change a Scale",
                )
            found = _replicas(op.get("value"), f"operation {k}: value")
        if found is None:
            raise ApiError(422, "Invalid", "the JSON patch has no operation on /spec/replicas")
        return found, None
    if method == "PATCH" and kind not in (
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ):
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"PATCH takes application/merge-patch+json, application/strategic-merge-patch+json or "
            f"application/json-patch+json, not {content_type or 'no Content-Type'}",
        )
    if not isinstance(data, dict):
        raise ApiError(400, "BadRequest", 'the body is a Scale object: {"spec": {"replicas": 3}}')
    spec = data.get("spec")
    if not isinstance(spec, dict) or "replicas" not in spec:
        raise ApiError(422, "Invalid", 'spec.replicas: missing; send {"spec": {"replicas": 3}}')
    if method == "PUT" and data.get("kind", "Scale") != "Scale":
        raise ApiError(400, "BadRequest", f"kind: {data.get('kind')!r}; a scale subresource takes a Scale")
    metadata = data.get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    return _replicas(spec["replicas"], "spec.replicas"), None if version is None else str(version)


def check_bounds(view: ScaleView, replicas: int) -> None:
    """Refuse a write outside ``[min, max]`` naming both, or to a chained vertex (its replicas
    are its head's)."""
    if view.head is not None:
        raise ApiError(
            409,
            "Conflict",
            f"{view.vertex} runs in {view.head}'s query (chained) and has no replicas of its own: "
            f"scale {view.head}, or put chain: false on the edge into {view.vertex}",
        )
    if not view.low <= replicas <= view.high:
        raise ApiError(
            422,
            "Invalid",
            f"spec.replicas: {replicas} is outside {view.vertex}'s bounds [min {view.low}, max {view.high}]; "
            f"write a count within them, or change scale.min/scale.max (tidal apply)",
        )
