"""What each query of a pipeline is told: one :class:`~tidal.spark.batch.config.QueryConfig` per chain.

A vertex that is not chained is a query of its own, as before. A chain's query
(:mod:`tidal.spec.chains`) is its head's: it reads the head's input (or source), runs the head's
function and then each follower's in the same task, and writes the tail's outputs or sink.
"""

from __future__ import annotations

from tidal.spark.batch.config import QueryConfig, input_buffer
from tidal.spec import PipelineSpec
from tidal.spec.chains import ChainPlan
from tidal.spec.routing import route

__all__ = ["query_config"]


def query_config(
    spec: PipelineSpec, plan: ChainPlan, vertex: str, *, db: str, run_dir: str, url: str | None
) -> QueryConfig:
    """The configuration of the query of ``vertex``, a chain's head (or a vertex on its own)."""
    v = spec.vertex(vertex)
    chain = plan.chain_of(vertex)
    if chain.head != vertex:
        raise ValueError(f"{vertex} runs in the query of its chain's head, {chain.head}")
    tail = spec.vertex(chain.tail)
    return QueryConfig(
        pipeline=spec.name,
        vertex=vertex,
        db=db,
        run_dir=run_dir,
        input=input_buffer(v),
        outputs=tuple(spec.outputs(tail.name)),
        routes=tuple(route(e.conditions) for e in spec.edges if e.from_ == tail.name),
        discard=tuple(e.on_full == "discardLatest" for e in spec.edges if e.from_ == tail.name),
        limits=spec.limits_of(vertex),
        own_batch_size=v.limits is not None and v.limits.read_batch_size is not None,
        backend=spec.buffers.backend,
        url=url,
        durability=spec.buffers.durability,
        source=v.source,
        udf=v.udf,
        sink=tail.sink,
        schema=next((r.schema_ for r in spec.input_records(vertex) if r is not None), None),
        followers=tuple((m, spec.vertex(m).udf) for m in chain.followers),
        rate_limit=spec.rate_limit(vertex),
        side_inputs=tuple(dict.fromkeys(n for m in chain.members for n in spec.vertex(m).side_inputs)),
    )
