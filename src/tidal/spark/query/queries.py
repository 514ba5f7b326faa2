"""What each query of a pipeline is told: one :class:`~tidal.spark.batch.config.QueryConfig` per chain.

A vertex that is not chained is a query of its own, as before. A chain's query
(:mod:`tidal.spec.chains`) is its head's: it reads the head's input (or source), runs the head's
function and then each follower's in the same task, and writes the tail's outputs or sink.
"""

from __future__ import annotations

from tidal.scaling.idle import IdleParams
from tidal.spark.batch import rundir
from tidal.spark.batch.config import QueryConfig, input_buffer
from tidal.spark.batch.idle import IdleWatch, Upstream
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
    reads = tuple(dict.fromkeys(n for m in chain.members for n in spec.vertex(m).side_inputs))
    return QueryConfig(
        pipeline=spec.name,
        vertex=vertex,
        db=db,
        run_dir=run_dir,
        input=input_buffer(v),
        outputs=tuple(spec.outputs(tail.name)),
        routes=tuple(route(e.conditions) for e in spec.edges if e.from_ == tail.name),
        discard=tuple(e.on_full == "discardLatest" for e in spec.edges if e.from_ == tail.name),
        shared=tuple(len(spec.inputs(name)) > 1 for name in spec.outputs(tail.name)),
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
        origins=tuple(dict.fromkeys(spec.inputs(vertex))),
        side_inputs=reads,
        run_id=rundir.run_id(run_dir) if reads else "",
        max_delay=spec.watermark.max_delay,
        idle=idle_watch(spec, plan, vertex),
    )


def idle_watch(spec: PipelineSpec, plan: ChainPlan, vertex: str) -> IdleWatch | None:
    """A reduce vertex's input watermarks (None: not a reduce, or one input and no
    ``watermark.idleSource``): per input, the buffers and sources upstream of it that must be
    empty before it is idle."""
    v = spec.vertex(vertex)
    idle = spec.watermark.idle_source
    origins = list(dict.fromkeys(spec.inputs(vertex)))
    if v.udf is None or v.udf.group_by is None or (idle is None and len(origins) < 2):
        return None
    group = v.udf.group_by
    w = group.window
    length = (
        w.fixed.length
        if w.fixed
        else w.sliding.length
        if w.sliding
        else w.session.timeout
        if w.session
        else 0.0
    )
    inputs = []
    for origin in origins:
        above, todo = set(), [origin]
        while todo:  # the input and every vertex upstream of it
            name = todo.pop()
            if name not in above:
                above.add(name)
                todo.extend(spec.inputs(name))
        heads = sorted(n for n in above if plan.chain_of(n).head == n)
        buffers = tuple(b for n in heads if (b := input_buffer(spec.vertex(n))) is not None)
        sources = tuple(n for n in sorted(above) if spec.vertex(n).source is not None)
        inputs.append(Upstream(origin, buffers, sources))
    return IdleWatch(
        None
        if idle is None
        else IdleParams(idle.threshold, idle.increment_by, idle.step_interval, idle.init_source_delay),
        span=length + group.allowed_lateness + spec.watermark.max_delay,
        inputs=tuple(inputs),
    )
