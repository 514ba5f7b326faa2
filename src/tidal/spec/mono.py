"""``kind: MonoVertex``: a source, an optional transformer and a sink run as **one** query.

Numaflow's MonoVertex fuses the three for pipelines whose steps need not scale apart: no
buffer between them, one replica count, one set of scaling rules (its MonoVertex autoscaler,
``spec/numaflow.md`` §1.10). Tidal's form is the pipeline's top-level keys with one vertex's
body in place of ``vertices`` and ``edges``::

    kind: MonoVertex
    name: orders
    source: {kafka: {bootstrapServers: 127.0.0.1:9092, topic: orders, groupId: tidal}}
    transformer: {map: mymodule:enrich}     # optional; ``udf:`` is the same key under Tidal's name
    sink: {parquet: {path: orders}}
    scale: {min: 0, max: 8}

It becomes a :class:`~tidal.spec.model.PipelineSpec` with a single vertex that has a source and
a sink (and the transformer as its UDF): one home for every check a pipeline runs, and the
runtime runs that vertex's query the way it runs every vertex's (read a range of the source, run
the function, write the sink, commit). Errors name the keys as written here (``transformer.map``,
not ``vertices[0].udf.map``).

How it differs:

* an HTTP source runs with one buffer: a request cannot wait for a micro-batch, so its receivers
  (``N-http``) run beside Spark and append to a buffer that the MonoVertex's function and sink
  read (``N``, and ``N-sink`` chained into it when there is a transformer). Numaflow runs the HTTP
  server inside each MonoVertex pod; Tidal's receivers scale by the KPA on their requests
  (``kpa:``), and ``N`` by the MonoVertex's ``scale`` on that buffer's backlog.

What it cannot have, and why (each refused with the reason):

* a SQL or DataFrame transformer: those steps are queries of their own over buffered rows;
* ``deadLetter`` on the transformer works as in a pipeline.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from tidal import errors
from tidal.spec.model import VertexSpec

__all__ = ["MONO_KIND", "PIPELINE_KIND", "as_pipeline", "check_mono", "is_mono", "mono_error", "mono_path"]

MONO_KIND = "MonoVertex"
PIPELINE_KIND = "Pipeline"
# The keys of a MonoVertex that belong to its one vertex; the others are the pipeline's.
_VERTEX_KEYS = ("source", "udf", "sink", "scale", "replicas", "policy", "kpa")
HTTP_SUFFIX = "-http"  # an HTTP MonoVertex's receivers
_VERTEX_PATH = re.compile(r"vertices\[[^\]]*\]")
SINK_SUFFIX = "-sink"  # its sink, when a transformer comes before it
_KEYS = (*_VERTEX_KEYS, "transformer", "name", "limits", "buffers", "controller", "cluster", "bypass")


def is_mono(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` (a pipeline or MonoVertex mapping) says ``kind: MonoVertex``; refuses
    any other kind than the two."""
    kind = data.get("kind", PIPELINE_KIND)
    if kind not in (PIPELINE_KIND, MONO_KIND):
        raise errors.SpecError(
            "kind", f"unknown kind {kind!r}", f"use {PIPELINE_KIND} (the default) or {MONO_KIND}"
        )
    return bool(kind == MONO_KIND)


def as_pipeline(data: Mapping[str, Any]) -> dict[str, Any]:
    """A MonoVertex mapping as the pipeline mapping of its one vertex (named after it)."""
    body = {k: v for k, v in data.items() if k != "kind"}
    if "transformer" in body and "udf" in body:
        raise errors.SpecError(
            "transformer", "is given twice (as transformer and as udf)", "keep one: they are the same key"
        )
    if "transformer" in body:
        body["udf"] = body.pop("transformer")
    for key in ("vertices", "edges", "records"):
        if key in body:
            raise errors.SpecError(
                key,
                f"a MonoVertex has no {key}",
                "write source, transformer and sink at the top level, or use kind: Pipeline",
            )
    for key in body:
        if key not in _KEYS:
            close = difflib.get_close_matches(key, _KEYS, n=1)
            fix = f"did you mean {close[0]!r}?" if close else f"valid keys here: {', '.join(sorted(_KEYS))}"
            raise errors.SpecError(key, "unknown key", fix)
    for key in ("source", "sink"):
        if key not in body:
            raise errors.SpecError(
                key, "is required", f"a MonoVertex reads a source and writes a sink: add {key}:"
            )
    if "bypass" in body:  # routes to the sink's parts: held by the sink (tidal.spark.sinks.routes)
        body["sink"] = {**(body["sink"] or {}), "bypass": body.pop("bypass")}
    vertex = {k: body.pop(k) for k in _VERTEX_KEYS if k in body}
    vertex["name"] = body.get("name")
    if "http" in (vertex.get("source") or {}):
        return {**body, **_served(vertex)}
    return {**body, "vertices": [vertex], "edges": []}


def _served(vertex: dict[str, Any]) -> dict[str, Any]:
    """An HTTP MonoVertex ``N`` as the pipeline that runs it: its receivers (``N-http``, scaled by
    the KPA with the MonoVertex's ``kpa``) append to one buffer, which ``N`` reads: the transformer
    chained into the sink (``N`` → ``N-sink``, one query, so a ``bypass`` sees the transformer's
    tags), or the sink alone. A request cannot wait for a micro-batch, so the receivers run beside
    Spark and need that buffer; ``N`` keeps the MonoVertex's ``scale``, ``replicas`` and ``policy``
    and scales on the buffer's backlog."""
    name = str(vertex["name"])
    receivers: dict[str, Any] = {"name": f"{name}{HTTP_SUFFIX}", "source": vertex.pop("source")}
    if "kpa" in vertex:
        receivers["kpa"] = vertex.pop("kpa")
    sink = {"name": f"{name}{SINK_SUFFIX}" if "udf" in vertex else name, "sink": vertex.pop("sink")}
    edges: list[dict[str, Any]] = [{"from": receivers["name"], "to": name}]
    if "udf" not in vertex:
        return {"vertices": [receivers, {**vertex, **sink}], "edges": edges}
    edges.append({"from": name, "to": sink["name"], "chain": True})
    return {"vertices": [receivers, vertex, sink], "edges": edges}


def mono_path(path: str, udf_key: str = "transformer") -> str:
    """A pipeline error's path as the MonoVertex's keys name it (``udf_key``: the key the
    function was written under, ``transformer`` or ``udf``). An HTTP MonoVertex runs as up to
    three vertices (:func:`_served`); each holds keys of the one the user wrote."""
    match = _VERTEX_PATH.match(path)
    if match is None:
        return path
    rest = path[match.end() :]
    if rest.startswith(".udf"):
        return udf_key + rest[len(".udf") :]
    return rest[1:] if rest.startswith(".") else rest


def mono_error(error: errors.SpecError, data: Mapping[str, Any]) -> errors.SpecError:
    """``error`` (and the problems it carries) with MonoVertex paths."""
    udf_key = "udf" if "udf" in data else "transformer"
    more = [errors.SpecError(mono_path(e.path, udf_key), e.problem, e.fix) for e in error.others]
    return errors.SpecError(mono_path(error.path, udf_key), error.problem, error.fix, more)


def check_mono(v: VertexSpec, at: str) -> list[errors.SpecError]:
    """What a MonoVertex cannot run (:mod:`tidal.spec.mono`)."""
    problems = []
    if v.source is not None and v.source.http is not None:
        problems.append(
            errors.SpecError(
                f"{at}.source.http",
                "an HTTP source and a sink in one vertex: the receivers append into a buffer, and a "
                "vertex that reads a source has none",
                "write it as kind: MonoVertex (Tidal puts the buffer after the receivers), or as a "
                "Pipeline with the HTTP source as its first vertex",
            )
        )
    if v.udf is not None and v.udf.engine != "python":
        problems.append(
            errors.SpecError(
                f"{at}.udf",
                f"a {v.udf.engine} step cannot be a MonoVertex's transformer: it is a query of its own",
                "use a Python map, filter or flatmap, or kind: Pipeline with the step as a vertex",
            )
        )
    return problems
