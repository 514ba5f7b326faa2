"""Benchmark: the autoscaler and Numaflow's flow control, in the simulator — a sink that fails and a
rate limit, under Numaflow's rules as upstream runs them and as Tidal runs them.

Two scenarios, each a source into one vertex at a steady 400 messages/s for 240 s, with the real
controller and scaling code (:mod:`tidal.sim`):

- **failing sink**: from 60 s to 120 s the system behind the sink accepts at most 200 messages/s
  and refuses the rest, which the sink's ``retryStrategy`` writes again (the simulator's
  ``VertexModel.refused``). More replicas send more writes to refuse and deliver no more.
- **rate-limited map**: a map vertex with ``limits.rateLimit: {max: 100, min: 10,
  rampUpSeconds: 120}`` (shared) and ``scale: {min: 1, max: 8}`` between the source and a sink:
  on the ramp its rate is under ``max``, so upstream's guard (at ``max``) lets it scale up on the
  pending (numaproj/numaflow #2976).

Per policy (``numaflow-upstream``: :class:`tidal.sim.peers.NumaflowUpstreamPolicy`; ``numaflow``:
Tidal's, with its ``sink-failing`` and ``rate-limited`` holds; ``tidal``, the default, with the
same holds, :mod:`tidal.controller.futile`): the vertex's most replicas, its
replica-seconds, the messages delivered, and the writes refused and sent again. The runs on Spark
(``tests/integration/test_sink_routes.py``, ``test_rate_limit.py``) show the same two holds.

Run: ``tidal bench flow-control``; writes ``runs/bench/flow_control.json`` and ``.md``.
"""

from __future__ import annotations

from typing import Any

from tidal.bench import RESULTS, write_result
from tidal.sim.model import VertexModel, default_models
from tidal.sim.peers import NumaflowUpstreamPolicy
from tidal.sim.run import SimResult, simulate
from tidal.sim.traces import Trace
from tidal.spec import numaflow_scale, parse_pipeline

SECONDS, RATE = 240, 400.0
SCALE = {"min": 1, "max": 8, "lookbackSeconds": 10, "scaleUpCooldownSeconds": 5}


def _failing_sink() -> tuple[Any, dict[str, VertexModel], str]:
    spec = parse_pipeline(
        {
            "name": "failing",
            "vertices": [
                {"name": "in", "source": {"generator": {"rate": RATE}}},
                {"name": "out", "scale": SCALE, "sink": {"log": {}}},
            ],
            "edges": [{"from": "in", "to": "out", "chain": False}],
        }
    )
    models = default_models(spec)
    models["out"] = VertexModel(capacity=4000.0, startup_seconds=8.0, refused=(60.0, 120.0, 200.0))
    return spec, models, "out"


def _rate_limited() -> tuple[Any, dict[str, VertexModel], str]:
    spec = parse_pipeline(
        {
            "name": "limited",
            "vertices": [
                {"name": "in", "source": {"generator": {"rate": RATE}}},
                {"name": "map", "scale": SCALE, "udf": {"map": "tidal.examples.udfs:upper"},
                 "limits": {"rateLimit": {"max": 100, "min": 10, "rampUpSeconds": 120}}},
                {"name": "out", "sink": {"log": {}}},
            ],
            "edges": [{"from": "in", "to": "map", "chain": False},
                      {"from": "map", "to": "out", "chain": False}],
        }
    )  # fmt: skip
    return spec, default_models(spec), "map"


SCENARIOS = {"failing sink": _failing_sink, "rate-limited map": _rate_limited}


def _row(scenario: str, policy: str, result: SimResult, vertex: str) -> dict[str, Any]:
    replicas = result.replicas[vertex]
    return {
        "scenario": scenario,
        "policy": policy,
        "vertex": vertex,
        "max_replicas": max(replicas),
        "replica_seconds": sum(replicas),
        "delivered": sum(result.delivered),
        "refused_writes": round(result.retried.get(vertex, 0.0)),
    }


def _upstream(spec: Any, name: str) -> NumaflowUpstreamPolicy:
    limit = spec.rate_limit(name)
    scale = numaflow_scale(spec.vertex(name).scale, name)
    return NumaflowUpstreamPolicy(scale, None if limit is None else limit.max)


def run() -> list[dict[str, Any]]:
    trace = Trace("steady", tuple([RATE] * SECONDS))
    rows = []
    for scenario, build in SCENARIOS.items():
        for policy in ("numaflow-upstream", "numaflow", "tidal"):
            spec, models, vertex = build()
            policies = None
            if policy == "numaflow-upstream":
                policies = {
                    v.name: NumaflowUpstreamPolicy(numaflow_scale(v.scale, v.name)) for v in spec.vertices
                }
            result = simulate(spec, trace, policy, models, policies=policies)
            rows.append(_row(scenario, policy, result, vertex))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| scenario | policy | most replicas | replica-s | delivered | writes refused |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['policy']} | {r['max_replicas']} | {r['replica_seconds']} | "
            f"{r['delivered']:,} | {r['refused_writes']:,} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    rows = run()
    write_result("flow_control", rows)
    (RESULTS / "flow_control.md").write_text(table(rows))
    print(table(rows))
    return 0
