"""Numaflow's diamond e2e manifests (numaproj/numaflow ``test/diamond-e2e/testdata``, copied as they
stand) convert, and each edge into a join keeps its buffer: a join reads one input buffer that
every upstream writes, so back pressure from it reaches each upstream (``docs/numaflow.md``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tidal.scaling import BufferLoad, Pressure, check_back_pressure
from tidal.spec import manifest, parse_pipeline
from tidal.spec.chains import folded, plan_chains
from tidal.spec.graph import downstream_edges, edges_of

E2E = Path(__file__).parents[2] / "data" / "numaflow" / "e2e"
REDIS = {"numaflow-go/redis-sink": "tidal.examples.numaflow:log_sink"}


@pytest.mark.parametrize(
    ("name", "join", "upstreams"),
    [
        ("join-on-map", "cat", {"in-0", "in-1"}),
        ("join-on-sink", "out", {"even-cat", "odd-cat"}),
        ("join-on-reduce", "compute-sum", {"atoi-0", "atoi-1"}),
        ("cycle-backward", "cat", {"in", "retry"}),
        ("cycle-to-self", "retry", {"in", "retry"}),
    ],
)
def test_each_edge_into_a_join_keeps_its_buffer_and_its_back_pressure(name, join, upstreams):
    spec = parse_pipeline(manifest.convert(yaml.safe_load((E2E / f"{name}.yaml").read_text()), REDIS).data)
    assert set(spec.inputs(join)) == upstreams
    plan = plan_chains(spec)
    into = [e for e in plan.edges if e.to == join]
    assert len(into) == len(upstreams) and not any(e.chained for e in into), plan.describe()
    # the controller's graph (chains folded into their heads) still has an edge from every
    # upstream's query into the join, so a full join buffer is each one's direct back pressure
    edges = edges_of(folded(spec, plan))
    full = {join: BufferLoad(95, 100)}
    for upstream in upstreams:
        head = plan.head_of(upstream)  # cycle-backward's retry runs in cat's query
        c = check_back_pressure(head, downstream_edges(head, edges), full)
        assert (c.level, c.buffer) == (Pressure.DIRECT, join), (upstream, c)
