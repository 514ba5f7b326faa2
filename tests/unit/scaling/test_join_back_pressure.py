"""Back pressure from a join (several edges into one vertex) reaches every upstream, on the pure
scaling layer: Numaflow's ``hasBackPressure`` walks each vertex's own edges, so a full join
buffer is *direct* pressure for each vertex with an edge into it, not only the first one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tidal.scaling import (
    BufferLoad,
    Edge,
    NumaflowScale,
    OnFull,
    Pressure,
    Rule,
    check_back_pressure,
    decide,
)
from tidal.spec.graph import downstream_edges

from .conftest import NOW, source

# Numaflow's diamond e2e join-on-map: in-0 → cat ← in-1, cat → sink
JOIN_ON_MAP = [Edge("in-0", "cat"), Edge("in-1", "cat"), Edge("cat", "sink")]
# and a diamond with a join one step further: in → a, in → b, a → j ← b, j → out
DIAMOND = [Edge("in", "a"), Edge("in", "b"), Edge("a", "j"), Edge("b", "j"), Edge("j", "out")]
USABLE = 1000 * 0.8
FULL = BufferLoad(0.95 * USABLE, USABLE)  # over the 90 % threshold
FAST = NumaflowScale(target_processing_seconds=3)


@pytest.mark.parametrize("upstream", ["in-0", "in-1"])
def test_a_full_join_buffer_is_direct_pressure_for_each_upstream(upstream):
    c = check_back_pressure(upstream, downstream_edges(upstream, JOIN_ON_MAP), {"cat": FULL})
    assert (c.level, c.buffer) == (Pressure.DIRECT, "cat")
    assert "buffer 'cat' at 95%" in c.reason


@pytest.mark.parametrize("upstream", ["in-0", "in-1"])
def test_each_upstream_that_wants_more_replicas_gives_one_back(upstream):
    # both upstreams want 4 (the seed's source: 60000 pending at 10000/s, target 3 s) and both
    # get −1 instead, the rule and the buffer named in the decision's event
    pressure = check_back_pressure(upstream, downstream_edges(upstream, JOIN_ON_MAP), {"cat": FULL})
    d = decide(FAST, replace(source(), vertex=upstream), NOW, pressure)
    assert (d.rule, d.current, d.desired, d.recommended) == (Rule.BACK_PRESSURE_DIRECT, 2, 1, 4)
    assert d.inputs["pressureBuffer"] == "cat"
    assert "buffer 'cat'" in d.reason
    assert d.to_dict()["rule"] == "back-pressure-direct"


def test_a_join_further_down_holds_the_vertex_before_both_branches():
    loads = {"j": FULL}
    for branch in ("a", "b"):
        c = check_back_pressure(branch, downstream_edges(branch, DIAMOND), loads)
        assert (c.level, c.buffer) == (Pressure.DIRECT, "j"), branch
    c = check_back_pressure("in", downstream_edges("in", DIAMOND), loads)
    assert (c.level, c.buffer) == (Pressure.DOWNSTREAM, "j")
    d = decide(FAST, source(), NOW, c)
    assert (d.rule, d.desired) == (Rule.BACK_PRESSURE_DOWNSTREAM, 2)


def test_a_full_branch_before_the_join_is_that_branchs_alone():
    # b's buffer full: in feels it directly, a (which does not write b) feels nothing
    loads = {"b": FULL}
    assert check_back_pressure("a", downstream_edges("a", DIAMOND), loads).level == Pressure.NONE
    assert check_back_pressure("in", downstream_edges("in", DIAMOND), loads).buffer == "b"


def test_discard_latest_is_per_edge_the_other_upstream_still_feels_the_join():
    edges = [Edge("in-0", "cat", OnFull.DISCARD_LATEST), Edge("in-1", "cat"), Edge("cat", "sink")]
    loads = {"cat": FULL}
    assert check_back_pressure("in-0", downstream_edges("in-0", edges), loads).level == Pressure.NONE
    assert check_back_pressure("in-1", downstream_edges("in-1", edges), loads).level == Pressure.DIRECT
