"""Back pressure from downstream buffers (numaflow.md §1.7)."""

import pytest

from tidal.scaling import BufferLoad, Edge, OnFull, Pressure, check_back_pressure
from tidal.spec.graph import downstream_edges

# in → map → out ; map → audit
EDGES = [Edge("in", "map"), Edge("map", "out"), Edge("map", "audit")]
LIMIT = 30000 * 0.8


def loads(**pending: float) -> dict[str, BufferLoad]:
    return {name: BufferLoad(p, LIMIT) for name, p in pending.items()}


def test_seed_example_threshold_is_36000_of_a_50000_buffer_at_80_percent():
    usable = 50000 * 0.8
    assert (
        check_back_pressure(
            "a", downstream_edges("a", [Edge("a", "b")]), {"b": BufferLoad(35999, usable)}
        ).level
        == Pressure.NONE
    )
    assert (
        check_back_pressure(
            "a", downstream_edges("a", [Edge("a", "b")]), {"b": BufferLoad(36000, usable)}
        ).level
        == Pressure.DIRECT
    )


def test_defaults_threshold_is_21600():
    assert check_back_pressure("map", downstream_edges("map", EDGES), loads(out=21599)).level == Pressure.NONE
    assert (
        check_back_pressure("map", downstream_edges("map", EDGES), loads(out=21600)).level == Pressure.DIRECT
    )


def test_direct_edge():
    c = check_back_pressure("in", downstream_edges("in", EDGES), loads(map=23000))
    assert (c.level, c.buffer) == (Pressure.DIRECT, "map")
    assert "buffer 'map' at 96%" in c.reason


def test_further_downstream():
    c = check_back_pressure("in", downstream_edges("in", EDGES), loads(map=10, audit=22000))
    assert (c.level, c.buffer) == (Pressure.DOWNSTREAM, "audit")


def test_direct_wins_over_downstream_whatever_the_order():
    edges = [Edge("in", "x"), Edge("x", "y"), Edge("in", "z")]
    c = check_back_pressure("in", downstream_edges("in", edges), loads(y=23000, z=23000))
    assert c.level == Pressure.DIRECT and c.buffer == "z"


def test_discard_latest_edge_is_ignored_but_not_what_is_beyond_it():
    edges = [Edge("in", "map", OnFull.DISCARD_LATEST), Edge("map", "out")]
    assert check_back_pressure("in", downstream_edges("in", edges), loads(map=24000)).level == Pressure.NONE
    assert (
        check_back_pressure("in", downstream_edges("in", edges), loads(map=24000, out=24000)).level
        == Pressure.DOWNSTREAM
    )


def test_missing_load_is_ignored():
    assert check_back_pressure("in", downstream_edges("in", EDGES), {}).level == Pressure.NONE


def test_sinks_have_no_downstream():
    assert check_back_pressure("out", downstream_edges("out", EDGES), loads(out=24000)).level == Pressure.NONE


def test_downstream_edges_visits_each_once_even_in_diamonds():
    edges = [Edge("a", "b"), Edge("a", "c"), Edge("b", "d"), Edge("c", "d"), Edge("d", "e")]
    found = downstream_edges("a", edges)
    assert len(found) == 5
    assert [e for e in found if e.to == "e"] == [Edge("d", "e")]


@pytest.mark.parametrize("usable", [0, -1])
def test_zero_length_buffer_is_ignored(usable):
    assert (
        check_back_pressure("a", downstream_edges("a", [Edge("a", "b")]), {"b": BufferLoad(5, usable)}).level
        == Pressure.NONE
    )
