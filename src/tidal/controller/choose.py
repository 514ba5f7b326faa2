"""Which policy decides each vertex of a running pipeline: the spec's ``policy`` (per vertex, or
the pipeline's, ``tidal`` unless it says otherwise), built from the vertex's own settings. A vertex
that names ``numaflow`` gets no entry: the :class:`~tidal.controller.loop.Controller` builds
:class:`~tidal.controller.policy.NumaflowPolicy` from its ``scale:`` block for every vertex not
given a policy object, so a Controller made without this module runs Numaflow's rules."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from tidal.controller.adaptive import AdaptivePolicy
from tidal.controller.flink import FlinkJob, FlinkPolicy
from tidal.controller.policy import KpaPolicy, VertexPolicy
from tidal.controller.request_policy import RequestKpaPolicy, RequestLoad
from tidal.scaling.flink import FlinkOptions
from tidal.spec import PipelineSpec, VertexSpec, numaflow_scale
from tidal.spec.kpa import kpa_spec

__all__ = ["adaptive_policy", "flink_policies", "spec_policies"]


def spec_policies(
    spec: PipelineSpec,
    now: float,
    replicas: Callable[[str], int],
    requests: Mapping[str, RequestLoad] | None = None,
    *,
    starts_per_tick: int | None = None,
) -> dict[str, VertexPolicy]:
    """The vertices whose policy is not Numaflow's: the KPA on their arrival rate (starting from
    the ``replicas`` each has now) or, for an HTTP source, on the load its request path measures
    (``requests``); Tidal's adaptive policy (pacing its starts at ``starts_per_tick``); or Flink's
    autoscaler (:func:`flink_policies`, one job for all the vertices that name it)."""
    policies: dict[str, VertexPolicy] = {}
    flink = flink_policies(spec, [v.name for v in spec.vertices if spec.policy_of(v.name) == "flink"])
    for v in spec.vertices:
        chosen = spec.policy_of(v.name)
        load = (requests or {}).get(v.name)
        if load is not None:
            policies[v.name] = RequestKpaPolicy(kpa_spec(v), v.name, now, load, ready=replicas(v.name))
        elif chosen == "kpa":
            policies[v.name] = KpaPolicy(kpa_spec(v), v.name, now=now, ready=replicas(v.name))
        elif chosen == "tidal":
            policies[v.name] = adaptive_policy(v, starts_per_tick=starts_per_tick)
        elif chosen == "flink":
            policies[v.name] = flink[v.name]
    return policies


def adaptive_policy(
    v: VertexSpec, *, starts_per_tick: int | None = None, shared_cores: bool = False
) -> AdaptivePolicy:
    """``policy: tidal`` for ``v``: its ``scale:`` bounds, and, where the vertex sets
    ``scaleDownCooldownSeconds``, that as the window whose largest recommendation a scale-down
    goes to (else 30 s): both say how soon what a load needed may be released. The wave demo
    sets 10 s, and a 30 s window kept the source at its catch-up's 3 replicas for a whole wave.
    ``starts_per_tick``: see :class:`AdaptivePolicy` (the runtime's cores in local mode).

    ``shared_cores`` (Spark local mode; the runtime sets it with ``starts_per_tick``): every
    vertex's replicas share the driver's cores, so the headroom a rise's backlog would drain
    through is not dependable, and the backlog drains in ``catch_up_seconds`` by replicas, as
    before issue #61 (in the simulator on 16 shared cores, a ×10 step cost 1.47× the oracle
    draining by headroom, 1.22× by replicas)."""
    down = v.scale.scale_down_cooldown_seconds
    scale = numaflow_scale(v.scale, v.name)
    policy = AdaptivePolicy(scale, starts_per_tick=starts_per_tick)
    if shared_cores or starts_per_tick is not None:
        policy.horizon.settle = None
    if down is not None:
        policy.down_window = down
    return policy


def flink_policies(
    spec: PipelineSpec, names: Iterable[str] | None = None, options: FlinkOptions | None = None
) -> dict[str, FlinkPolicy]:
    """``policy: flink`` for ``names`` (default: every vertex), sharing one :class:`FlinkJob`, so
    the target rates flow from the sources down and the job rescales as one. A keyed (reduce)
    vertex aligns to its ``partitions`` as Flink aligns to key groups; a source's partition count
    is not known from the spec, so sources are not aligned (``scale.max`` bounds them).
    ``options``: the job's ``job.autoscaler.*`` (the spec's ``controller.flink`` otherwise)."""
    wanted = None if names is None else set(names)
    chosen = [v for v in spec.vertices if wanted is None or v.name in wanted]
    inputs = {v.name: tuple(e.from_ for e in spec.edges if e.to == v.name) for v in chosen}
    job = FlinkJob(options or spec.controller.flink_options(), inputs)
    out: dict[str, FlinkPolicy] = {}
    for v in chosen:
        scale = numaflow_scale(v.scale, v.name)
        keyed = v.udf is not None and v.udf.reduce is not None and v.partitions is not None
        out[v.name] = FlinkPolicy(
            v.name,
            job,
            min_replicas=scale.min,
            max_replicas=scale.max,
            max_parallelism=v.partitions if keyed else None,
            keyed=keyed,
        )
    return out
