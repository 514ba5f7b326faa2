"""Live edits of a running pipeline: what may change without a restart, what a restart may
carry, and the changes as a person reads them. Pure: the runtime (:mod:`tidal.spark.run.operations`)
applies them.

- :data:`LIVE_FIELDS` change at once (scale blocks, policies, controller settings, executor
  bounds, ``readBatchSize``); :func:`restart_needed` names everything else that differs, each
  with why.
- A restart (``tidal apply --restart``) drains the pipeline and starts it again on the same run
  directory, so it may carry what is read when a query starts (a step's code and options, the
  buffer limits, the trigger) — but not what lays out the run's state: the vertices and edges,
  the chains (a chain is one query with one checkpoint and one series of batch ids, which its
  sinks commit by), the buffer backend. :func:`restart_refused` names those.
"""

from __future__ import annotations

import json
from typing import Any

from tidal.spec.chains import plan_chains
from tidal.spec.model import PipelineSpec

__all__ = ["LIVE_FIELDS", "changes", "restart_needed", "restart_refused"]

# The executor settings a running pipeline takes without a restart (the allocator's bounds).
LIVE_CLUSTER = ("minExecutors", "maxExecutors", "shrinkWaitSeconds", "executorIdleSeconds", "executorPayoff")
# What a live edit may change; everything else in the spec needs a restart.
LIVE_FIELDS = (
    "vertices[].scale",
    "vertices[].policy",
    "vertices[].kpa",
    "vertices[].replicas",
    "policy",
    "controller",
    *(f"cluster.{key}" for key in LIVE_CLUSTER),
    "limits.readBatchSize",
)


def _without_live(spec: PipelineSpec) -> dict[str, Any]:
    data = spec.model_dump(by_alias=True)
    for key in ("policy", "controller"):
        data.pop(key, None)
    for key in LIVE_CLUSTER:
        data["cluster"].pop(key, None)
    data["limits"].pop("readBatchSize", None)
    for vertex in data["vertices"]:
        for key in ("scale", "policy", "kpa", "replicas"):
            vertex.pop(key, None)
    return data


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")
        ]
    return [] if repr(a) == repr(b) else [path or "(the whole spec)"]


def restart_needed(old: PipelineSpec, new: PipelineSpec) -> list[str]:
    """What in ``new`` differs from ``old`` beyond :data:`LIVE_FIELDS`, each with why it needs a
    restart; empty: ``new`` can be applied to the running pipeline."""
    reasons = []
    if new.name != old.name:
        return [f"name: {old.name} → {new.name} is another pipeline (use another --run-dir)"]
    if [v.name for v in new.vertices] != [v.name for v in old.vertices] or [
        (e.from_, e.to) for e in new.edges
    ] != [(e.from_, e.to) for e in old.edges]:
        reasons.append("the vertices or edges changed: the graph is laid out in queries and buffers at start")
    else:
        for field in _differences(_without_live(old), _without_live(new)):
            if field.startswith("limits.") or field.startswith("buffers"):
                why = "buffers and queries are created with them"
            elif ".source" in field or ".udf" in field or ".sink" in field:
                why = "the step's code and connections are loaded when its query starts"
            elif ".chain" in field:
                why = "chaining decides which queries run"
            else:
                why = "it is read when the run starts"
            reasons.append(f"{field}: {why}")
    was, now = plan_chains(old).signature or "none", plan_chains(new).signature or "none"
    if not reasons and was != now:
        reasons.append(
            f"the chains change ({was} → {now}): members asking for different settings are not "
            "chained, and a chain is one query"
        )
    return reasons


def restart_refused(old: PipelineSpec, new: PipelineSpec) -> list[str]:
    """What even a drained restart on the same run directory cannot carry, each with why."""
    reasons = []
    if new.name != old.name:
        reasons.append(f"name: {old.name} → {new.name} is another pipeline")
    if [v.name for v in new.vertices] != [v.name for v in old.vertices] or [
        (e.from_, e.to) for e in new.edges
    ] != [(e.from_, e.to) for e in old.edges]:
        reasons.append("the vertices or edges: each query's checkpoint and each buffer belong to one of them")
    was, now = plan_chains(old).signature or "none", plan_chains(new).signature or "none"
    if was != now:
        reasons.append(f"the chains ({was} → {now}): a sink commits by its query's batch ids")
    if new.buffers.backend != old.buffers.backend:
        reasons.append(f"buffers.backend ({old.buffers.backend} → {new.buffers.backend})")
    return reasons


def changes(old: PipelineSpec, new: PipelineSpec) -> list[str]:
    """The live fields that differ, one line each (``vertices[enrich].scale.max: 6 → 8``)."""
    out = []
    a, b = old.model_dump(by_alias=True), new.model_dump(by_alias=True)
    for va, vb in zip(a["vertices"], b["vertices"], strict=True):
        for key in ("scale", "policy", "kpa", "replicas"):
            out += [f"vertices[{va['name']}].{d}" for d in _described(va.get(key), vb.get(key), key)]
    for key in ("policy", "controller"):
        out += _described(a.get(key), b.get(key), key)
    for key in LIVE_CLUSTER:
        out += _described(a["cluster"].get(key), b["cluster"].get(key), f"cluster.{key}")
    out += _described(
        a["limits"].get("readBatchSize"), b["limits"].get("readBatchSize"), "limits.readBatchSize"
    )
    return out


def _described(a: Any, b: Any, path: str) -> list[str]:
    def at(value: Any, field: str) -> Any:
        for part in field.split(".")[1:] if field != path else []:
            value = value.get(part) if isinstance(value, dict) else None
        return value

    return [f"{field}: {json.dumps(at(a, field), default=str)} → {json.dumps(at(b, field), default=str)}"
            for field in _differences(a, b, path)]  # fmt: skip
