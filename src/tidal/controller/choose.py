"""Which policy decides each vertex of a running pipeline: the spec's ``policy`` (per vertex, or
the pipeline's), built from the vertex's own settings. Vertices left out get the controller's
default, :class:`~tidal.controller.policy.NumaflowPolicy` with their ``scale:`` block."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tidal.controller.adaptive import AdaptivePolicy
from tidal.controller.policy import KpaPolicy, VertexPolicy
from tidal.controller.request_policy import RequestKpaPolicy, RequestLoad
from tidal.spec import PipelineSpec, VertexSpec, numaflow_scale
from tidal.spec.kpa import kpa_spec

__all__ = ["adaptive_policy", "spec_policies"]


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
    (``requests``); or Tidal's adaptive policy (pacing its starts at ``starts_per_tick``)."""
    policies: dict[str, VertexPolicy] = {}
    for v in spec.vertices:
        chosen = spec.policy_of(v.name)
        load = (requests or {}).get(v.name)
        if load is not None:
            policies[v.name] = RequestKpaPolicy(kpa_spec(v), v.name, now, load, ready=replicas(v.name))
        elif chosen == "kpa":
            policies[v.name] = KpaPolicy(kpa_spec(v), v.name, now=now, ready=replicas(v.name))
        elif chosen == "tidal":
            policies[v.name] = adaptive_policy(v, starts_per_tick=starts_per_tick)
    return policies


def adaptive_policy(v: VertexSpec, *, starts_per_tick: int | None = None) -> AdaptivePolicy:
    """``policy: tidal`` for ``v``: its ``scale:`` bounds, and, where the vertex sets
    ``scaleDownCooldownSeconds``, that as the window whose largest recommendation a scale-down
    goes to (else 30 s): both say how soon what a load needed may be released. The wave demo
    sets 10 s, and a 30 s window kept the source at its catch-up's 3 replicas for a whole wave.
    ``starts_per_tick``: see :class:`AdaptivePolicy` (the runtime's cores in local mode)."""
    down = v.scale.scale_down_cooldown_seconds
    scale = numaflow_scale(v.scale, v.name)
    policy = AdaptivePolicy(scale, starts_per_tick=starts_per_tick)
    if down is not None:
        policy.down_window = down
    return policy
