"""The simulator's refusing sink and rate limit, under Numaflow's rules as upstream runs them and
as Tidal runs them (``tidal bench flow-control``): the same messages delivered, Tidal's holds keep
the vertex at min where upstream's rules scale it to max on a pending more replicas cannot drain."""

from __future__ import annotations

from tidal.bench.flow_control import run


def test_tidal_holds_a_failing_sink_and_a_throttled_map_where_upstream_scales_them_to_max():
    rows = {(r["scenario"], r["policy"]): r for r in run()}
    for scenario in ("failing sink", "rate-limited map"):
        upstream, tidal = rows[scenario, "numaflow-upstream"], rows[scenario, "numaflow"]
        assert upstream["max_replicas"] == 8 and tidal["max_replicas"] == 1, (upstream, tidal)
        assert tidal["delivered"] == upstream["delivered"]  # more replicas delivered nothing more
    # and fewer writes thrown at the refusing system
    assert (
        rows["failing sink", "numaflow"]["refused_writes"]
        < rows["failing sink", "numaflow-upstream"]["refused_writes"]
    )
