"""The pipeline as a graph: every walk over vertices and edges, in one place.

Validation finds cycles here (:func:`find_cycle`), the controller asks which edges lie downstream
of a vertex (:func:`downstream_edges`: back pressure and the path wake-up) and the simulator steps
vertices in :func:`topological` order. The walks take plain names and ``(from, to)`` pairs so that
validation can use them on a spec it has not accepted yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tidal.scaling.backpressure import Edge
from tidal.spec.model import PipelineSpec, VertexSpec

__all__ = ["downstream_edges", "edges_of", "find_cycle", "http_sources", "topological"]


def http_sources(spec: PipelineSpec) -> list[str]:
    """The vertices with an HTTP source: request paths (receiver processes), not Spark queries."""
    return [v.name for v in spec.vertices if v.source is not None and v.source.http is not None]


def edges_of(spec: PipelineSpec) -> list[Edge]:
    """The spec's edges as the scaling core's :class:`~tidal.scaling.Edge` values."""
    return [Edge(e.from_, e.to, e.on_full) for e in spec.edges]


def downstream_edges(vertex: str, edges: Iterable[Edge]) -> list[Edge]:
    """Every edge reachable from ``vertex``, depth first, each once (Numaflow's back-pressure walk)."""
    by_source: dict[str, list[Edge]] = {}
    for edge in edges:
        by_source.setdefault(edge.source, []).append(edge)
    found: list[Edge] = []
    visited: set[str] = set()
    stack = [vertex]
    # Depth first, in edge order: an explicit stack of iterators keeps deep pipelines off the
    # recursion limit.
    iters = {vertex: iter(by_source.get(vertex, []))}
    visited.add(vertex)
    while stack:
        name = stack[-1]
        step = next(iters[name], None)
        if step is None:
            stack.pop()
            continue
        found.append(step)
        if step.to not in visited:
            visited.add(step.to)
            iters[step.to] = iter(by_source.get(step.to, []))
            stack.append(step.to)
    return found


def find_cycle(names: Sequence[str], edges: Sequence[tuple[str, str]]) -> list[str] | None:
    """A cycle as the list of names around it (first name repeated at the end), or ``None``."""
    out: dict[str, list[str]] = {n: [] for n in names}
    for a, b in edges:
        out[a].append(b)
    state: dict[str, int] = {}  # 1 = on the path, 2 = done
    for root in names:
        if root in state:
            continue
        path = [root]
        state[root] = 1
        iters = [iter(out[root])]
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(out[nxt]))
    return None


def topological(spec: PipelineSpec) -> list[VertexSpec]:
    """The vertices, every one after all of its upstreams (Kahn's algorithm, spec order on ties);
    the vertices of a cycle (a retry loop, :mod:`tidal.spec.routing`) come last, in spec order."""
    incoming = {v.name: 0 for v in spec.vertices}
    for e in spec.edges:
        incoming[e.to] += 1
    by_name = {v.name: v for v in spec.vertices}
    ready = [v.name for v in spec.vertices if incoming[v.name] == 0]
    order = []
    while ready:
        name = ready.pop(0)
        order.append(by_name[name])
        for e in spec.edges:
            if e.from_ == name:
                incoming[e.to] -= 1
                if incoming[e.to] == 0:
                    ready.append(e.to)
    placed = {v.name for v in order}
    return order + [v for v in spec.vertices if v.name not in placed]
