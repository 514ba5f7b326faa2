"""What a vertex's decision needs from around it: what is heading to it from upstream, what its
feeders can deliver at most, and what its shared rate limit lets through now.

Pure functions of the controller's per-vertex state and the tick's samples (the controller's
loop gathers, these compute), so the loop stays one pass and each rule has one home.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from tidal.controller.ports import ProbeSample
from tidal.controller.state import VertexState
from tidal.scaling.throttle import ceiling
from tidal.spec import PipelineSpec

__all__ = ["heading_to", "on_its_way", "shared_rate_limit", "upstream_limit"]


def shared_rate_limit(spec: PipelineSpec, v: VertexState, now: float) -> float | None:
    """What the vertex's shared rate limit lets through a second now, on its ramp from when
    the controller first saw the vertex (None: none, or one per replica)."""
    limit = spec.rate_limit(v.name)
    if limit is None or limit.store != "shared":
        return None
    started = v.started_at if v.started_at is not None else now
    return ceiling(limit.limit, now - started)


def upstream_limit(feeders: Collection[str], vertices: Mapping[str, VertexState]) -> float | None:
    """What the ``feeders`` of a vertex deliver at most a second, where their policies know it
    (:meth:`~tidal.controller.policy.VertexPolicy.most_delivered`); ``None`` if one does not,
    or there are none."""
    total = 0.0
    for feeder in feeders:
        most = vertices[feeder].policy.most_delivered()
        if most is None:
            return None
        total += most
    return total if feeders else None


def heading_to(
    upstream: Collection[str],
    vertices: Mapping[str, VertexState],
    samples: Mapping[str, ProbeSample | None],
) -> tuple[float, float | None, float]:
    """What is heading to a vertex whose ``upstream`` vertices are these: their pending, the
    messages that arrived at the sources among them so far (``None`` for a source, or when a
    source upstream cannot say), and how old that count is (the oldest source's)."""
    if not upstream:
        return 0.0, None, 0.0
    pending = sum(s.pending or 0.0 for u in upstream if (s := samples.get(u)) is not None)
    arrived, age = 0.0, 0.0
    for u in upstream:
        s = samples.get(u)
        if vertices[u].kind.reads_source:
            if s is None or s.pending is None:
                return pending, None, 0.0
            arrived, age = arrived + s.processed + s.pending, max(age, s.age)
    return pending, arrived, age


def on_its_way(
    upstream: Collection[str],
    vertices: Mapping[str, VertexState],
    samples: Mapping[str, ProbeSample | None],
) -> bool:
    """Messages pending upstream of a vertex (its ``upstream`` vertices), at a vertex that is not
    stuck: work coming, which the executor allocator must not take for idleness
    (:meth:`~tidal.controller.loop.Controller.idle_for`). Counted idle, a woken path's executors
    went while its source started: on the cluster's waves `enrich` was raised 1 → 4 with its
    source's, the source took 13 s to its first batch from 0, and `enrich`'s executors were
    killed as idle 10 s after the raise, with 12,232 orders pending at the source; the wave then
    waited for them again (246 executor-s where a wave took 100-140, 2026-12-07). A stuck
    vertex's pending (a hung UDF) is not on its way."""
    return any(
        (s := samples.get(u)) is not None and (s.pending or 0.0) > 0 and vertices[u].stuck_since is None
        for u in upstream
    )
