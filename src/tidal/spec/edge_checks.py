"""The checks of an edge's ``conditions`` against the vertex it leaves (:mod:`tidal.spec.routing`).

Numaflow accepts a condition no message can meet and drops everything on that edge at run time;
Tidal says so at start, where it can tell: after a source, a SQL or DataFrame step or an Arrow
UDF (none of them tags), and after a UDF that declares the tags it emits.
"""

from __future__ import annotations

from tidal.spec.model import PipelineSpec

__all__ = ["condition_problems"]


def condition_problems(spec: PipelineSpec) -> list[tuple[str, str, str]]:
    """``(field, problem, fix)`` for every edge whose ``conditions`` cannot work: only a Python
    UDF tags messages (one row at a time), and one that declares its ``tags`` emits no other."""
    found = []
    for k, edge in enumerate(spec.edges):
        if edge.conditions is None:
            continue
        at = f"edges[{k}].conditions"
        try:
            v = spec.vertex(edge.from_)
        except KeyError:
            continue  # the graph check names the unknown vertex
        if v.udf is None:
            found.append(
                (
                    at,
                    f"{edge.from_!r} is a {v.kind}: only a UDF tags messages, so the condition "
                    "would take all of them or none",
                    "remove conditions, or put a UDF that tags in between",
                )
            )
        elif v.udf.engine != "python" or v.udf.batch == "arrow":
            what = f"a {v.udf.engine} step" if v.udf.engine != "python" else "an Arrow UDF (batch: arrow)"
            found.append(
                (
                    at,
                    f"{edge.from_!r} is {what}, which cannot tag messages",
                    "use a row UDF (map, flatmap, pynumaflow) that returns tagged Messages",
                )
            )
        elif v.udf.tags is not None:
            unknown = [t for t in edge.conditions.tags.values if t not in v.udf.tags]
            if unknown:
                found.append(
                    (
                        f"{at}.tags.values",
                        f"{', '.join(map(repr, unknown))} is not among the tags "
                        f"{edge.from_!r} emits ({', '.join(v.udf.tags) or 'none'})",
                        f"use one of them, or add it to vertices[{edge.from_}].udf.tags",
                    )
                )
    return found
