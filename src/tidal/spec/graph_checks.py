"""The checks of the pipeline's graph: names, edges, cycles, reachability, and each edge's
``conditions`` against the vertex it leaves (:mod:`tidal.spec.routing`).

Numaflow accepts a condition no message can meet and drops everything on that edge at run time;
Tidal says so at start, where it can tell: after a source, a SQL or DataFrame step or an Arrow
UDF (none of them tags), and after a UDF that declares the tags it emits.
"""

from __future__ import annotations

import difflib

from tidal import errors
from tidal.spec import graph
from tidal.spec.model import PipelineSpec

__all__ = ["check_graph", "condition_problems"]


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


# -- the graph -----------------------------------------------------------------------------------


def check_graph(spec: PipelineSpec) -> list[errors.SpecError]:
    problems: list[errors.SpecError] = []
    index: dict[str, int] = {}
    for i, v in enumerate(spec.vertices):
        if v.name in index:
            problems.append(
                errors.SpecError(
                    f"vertices[{i}].name",
                    f"{v.name!r} is already the name of vertices[{index[v.name]}]",
                    "give every vertex its own name",
                )
            )
        else:
            index[v.name] = i
    names = list(index)
    seen_edges: dict[tuple[str, str], int] = {}
    good: list[tuple[str, str]] = []
    for k, e in enumerate(spec.edges):
        ok = True
        for end, name in (("from", e.from_), ("to", e.to)):
            if name not in index:
                close = difflib.get_close_matches(name, names, n=1)
                fix = f"did you mean {close[0]!r}?" if close else f"known vertices: {', '.join(names)}"
                problems.append(errors.SpecError(f"edges[{k}].{end}", f"no vertex named {name!r}", fix))
                ok = False
        if not ok:
            continue
        pair = (e.from_, e.to)
        if pair in seen_edges:
            problems.append(
                errors.SpecError(
                    f"edges[{k}]", f"repeats edges[{seen_edges[pair]}] ({e.from_} → {e.to})", "remove one"
                )
            )
            continue
        seen_edges[pair] = k
        if spec.vertices[index[e.to]].source is not None:
            problems.append(
                errors.SpecError(
                    f"edges[{k}].to",
                    f"{e.to!r} is a source: sources have no inputs",
                    "point the edge at a udf or sink",
                )
            )
        if spec.vertices[index[e.from_]].sink is not None:
            problems.append(
                errors.SpecError(
                    f"edges[{k}].from",
                    f"{e.from_!r} is a sink: sinks have no outputs",
                    "start the edge at a source or udf",
                )
            )
        good.append(pair)
    # A cycle is Numaflow's retry loop: it needs an edge with conditions, or every message would
    # go round forever (Numaflow accepts that; Tidal refuses it).
    conditional = {(e.from_, e.to) for e in spec.edges if e.conditions is not None}
    cycle = graph.find_cycle(names, [pair for pair in good if pair not in conditional])
    if cycle:
        problems.append(
            errors.SpecError(
                "edges",
                f"cycle {' → '.join(cycle)} has no edge with conditions: every message would go round "
                "forever",
                "put conditions on one edge of the cycle (a retry loop, as Numaflow's examples), or "
                "remove it",
            )
        )
    for i, v in enumerate(spec.vertices):
        if v.mono and len(spec.vertices) > 1:
            problems.append(
                errors.SpecError(
                    f"vertices[{i}]",
                    f"{v.name!r} has both a source and a sink: that is a MonoVertex, which runs alone",
                    "give each vertex one of source, udf, sink, or write the MonoVertex as its own "
                    "file (kind: MonoVertex)",
                )
            )
    if not any(v.source is not None for v in spec.vertices):
        problems.append(
            errors.SpecError("vertices", "no source vertex", "add a vertex with source: (generator or user)")
        )
    reached = set(n for n in names if spec.vertices[index[n]].source is not None)
    frontier = list(reached)
    while frontier:
        at = frontier.pop()
        for a, b in good:
            if a == at and b not in reached:
                reached.add(b)
                frontier.append(b)
    has_input = {b for _, b in good}
    has_output = {a for a, _ in good}
    for i, v in enumerate(spec.vertices):
        if v.source is None and v.name not in has_input:
            problems.append(
                errors.SpecError(
                    f"vertices[{i}]",
                    f"{v.kind} {v.name!r} has no input edge: it would never receive a message",
                    f"add an edge with to: {v.name}, or remove the vertex",
                )
            )
        if (
            v.source is None
            and v.name in has_input
            and v.name not in reached
            and any(x.source is not None for x in spec.vertices)
        ):
            problems.append(
                errors.SpecError(
                    f"vertices[{i}]",
                    f"{v.kind} {v.name!r} cannot be reached from a source (its inputs only loop among "
                    "themselves)",
                    f"add an edge from a source's path to {v.name}, or remove the loop",
                )
            )
        if v.sink is None and v.name not in has_output:
            problems.append(
                errors.SpecError(
                    f"vertices[{i}]",
                    f"{v.kind} {v.name!r} has no output edge: its messages would pile up",
                    f"add an edge with from: {v.name} to a udf or sink",
                )
            )
    return problems
