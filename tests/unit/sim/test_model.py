"""The simulated pipeline: capacity, start-up delay, bounded buffers, and nothing lost."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidal.sim import SimPipeline, Trace, VertexModel, chained, simulate
from tidal.spec import Pipeline


def chain(max_length: int = 30_000) -> object:
    return (
        Pipeline("c", limits={"bufferMaxLength": max_length})
        .source("in", generator={"rate": 1})
        .map("work", "tidal.examples.udfs:upper")
        .sink("out", "blackhole")
        .build()
    )


def fanout() -> object:
    return (
        Pipeline("f")
        .source("in", generator={"rate": 1})
        .map("a", "tidal.examples.udfs:upper")
        .map("b", "tidal.examples.udfs:upper")
        .sink("sa", "blackhole")
        .sink("sb", "blackhole")
        .edge("in", "a")
        .edge("in", "b")
        .edge("a", "sa")
        .edge("b", "sb")
        .build()
    )


MODELS = {
    "in": VertexModel(1000, 0, batch_seconds=0),
    "work": VertexModel(100, 5, batch_seconds=0),
    "out": VertexModel(1000, 0, batch_seconds=0),
}


def test_a_replica_processes_its_capacity_per_second() -> None:
    sim = SimPipeline(chain(), MODELS)
    sim.step(500)
    assert sim.sample("in").processed == 500
    assert sim.sample("work").processed == 100  # one replica of 100/s
    assert sim.sample("work").pending == 400
    assert sim.sample("out").processed == 100
    assert sim.delivered == {"out": 100}
    assert sim.delays == {1.0: 100}


def test_a_replica_sustains_its_micro_batches_not_its_work_rate() -> None:
    """Batches of readBatchSize (500 here), each 0.25 s of fixed cost besides the work: a 4000/s
    source sustains 500 / (0.25 + 0.125) = 1333/s, and busy time sees only the work."""
    model = VertexModel(4000, 0, busy_noise=0.0)
    assert model.sustained(500) == 500 / 0.375
    sim = SimPipeline(chain(), {**MODELS, "in": model})
    for _ in range(3):
        sim.step(2000)
    assert sim.sample("in").processed == 4000  # 1333.3/s: whole messages, the fractions carried
    assert sim.sample("in").pending == 2000
    assert sim.sample("in").busy_seconds == 1.0  # 4000 messages of work at 4000/s


def test_new_replicas_work_only_after_their_startup_delay() -> None:
    sim = SimPipeline(chain(), MODELS)
    sim.step(1000)  # t 0 → 1
    sim.set_replicas("work", 3)  # asked at t=1, ready at t=6
    assert sim.sample("work").replicas == 3 and sim.sample("work").ready == 1
    for _ in range(4):
        sim.step(0)
    assert sim.sample("work").processed == 500  # t 1 → 5: still one replica
    sim.step(0)  # t 5 → 6
    assert sim.sample("work").processed == 600
    sim.step(0)  # t 6 → 7: three replicas
    assert sim.sample("work").processed == 900
    assert sim.sample("work").ready == 3


def test_a_replica_shows_as_ready_only_once_it_had_work() -> None:
    """As on Spark (``ControlStore.ready_replicas``): a replica counts as ready once a
    micro-batch ran on it, so one that came up after the vertex's messages ran out stays
    "starting" until the next messages; before any work at all, every replica is ready."""
    sim = SimPipeline(chain(), MODELS)
    assert sim.sample("work").ready == 1  # nothing ran yet: taken as ready
    sim.step(100)  # t 0 → 1: `in` forwards 100
    sim.step(0)  # t 1 → 2: `work` processes them at t=1
    sim.set_replicas("work", 3)  # ready at t=7, with nothing left to do
    for _ in range(8):
        sim.step(0)
    assert sim.sample("work").ready == 1  # came up idle: not seen
    sim.step(1000)  # t 10 → 11: to `work`'s queue
    sim.step(0)  # t 11 → 12: three replicas work
    assert sim.sample("work").ready == 3


def test_scaling_down_removes_starting_replicas_first() -> None:
    sim = SimPipeline(chain(), MODELS, initial={"work": 2})
    sim.step(0)
    sim.set_replicas("work", 4)
    sim.set_replicas("work", 2)
    assert sim.sample("work").replicas == 2 and sim.sample("work").ready == 2


def test_zero_replicas_process_nothing() -> None:
    sim = SimPipeline(chain(), MODELS, initial={"work": 0})
    for _ in range(3):
        sim.step(100)
    assert sim.sample("work").processed == 0
    assert sim.sample("work").pending == 300
    assert sim.delivered == {"out": 0}


def test_a_full_buffer_stops_its_writer() -> None:
    spec = chain(max_length=1000)  # usable: 800
    sim = SimPipeline(spec, {**MODELS, "work": VertexModel(10, 0, batch_seconds=0)})
    for _ in range(5):
        sim.step(1000)
    assert sim.sample("work").pending <= sim.room == 800
    assert sim.sample("in").pending > 0  # the rest waits at the source
    total = sim.sample("in").pending + sim.sample("work").pending + sim.delivered["out"]
    assert total == 5000


def test_busy_time_is_work_over_capacity_within_its_measurement_noise() -> None:
    sim = SimPipeline(chain(), MODELS, initial={"work": 4})
    sim.step(250)
    assert 2.5 * 0.9 <= sim.sample("work").busy_seconds <= 2.5 * 1.1
    exact = {
        name: VertexModel(m.capacity, m.startup_seconds, busy_noise=0.0, batch_seconds=0)
        for name, m in MODELS.items()
    }
    sim = SimPipeline(chain(), exact, initial={"work": 4})
    sim.step(250)
    assert sim.sample("work").busy_seconds == 2.5


@settings(max_examples=60, deadline=None)
@given(
    arrivals=st.lists(st.integers(0, 3000), min_size=1, max_size=60),
    changes=st.lists(
        st.tuples(st.integers(0, 59), st.sampled_from(["in", "work", "out"]), st.integers(0, 6))
    ),
    capacity=st.floats(1, 700),
    max_length=st.integers(10, 5000),
)
def test_conservation_in_equals_out_plus_buffered(arrivals, changes, capacity, max_length) -> None:
    sim = SimPipeline(chain(max_length), {**MODELS, "work": VertexModel(capacity, 2.5, batch_seconds=0)})
    for i, n in enumerate(arrivals):
        for at, vertex, replicas in changes:
            if at == i:
                sim.set_replicas(vertex, replicas)
        sim.step(n)
        arrived, delivered, in_flight = sim.conservation()["out"]
        assert arrived == sum(arrivals[: i + 1])
        assert arrived == delivered + in_flight
        assert all(v.inputs.length <= sim.room for name, v in sim.vertices.items() if name != "in")
    assert sum(sim.delays.values()) == sim.delivered["out"]


@settings(max_examples=30, deadline=None)
@given(
    arrivals=st.lists(st.integers(0, 2000), min_size=1, max_size=40), a=st.integers(0, 3), b=st.integers(0, 3)
)
def test_conservation_with_fan_out(arrivals, a, b) -> None:
    models = {n: VertexModel(300, 1, batch_seconds=0) for n in ("in", "a", "b", "sa", "sb")}
    sim = SimPipeline(fanout(), models, initial={"a": a, "b": b})
    for n in arrivals:
        sim.step(n)
    for arrived, delivered, in_flight in sim.conservation().values():
        assert arrived == sum(arrivals) == delivered + in_flight


def test_local_mode_replicas_share_the_cores() -> None:
    fast, slow = VertexModel(10_000, 0, batch_seconds=0), VertexModel(100, 0, busy_noise=0.0, batch_seconds=0)
    models = {"in": fast, "work": slow, "out": fast}
    wide = SimPipeline(chain(), models, initial={"work": 6})
    wide.step(5000)
    wide.step(5000)
    assert wide.sample("work").processed == 1200  # six replicas, each with its own core
    local = SimPipeline(chain(), models, initial={"work": 6}, cores=2)
    local.step(5000)  # work's buffer fills (only the source wanted a slot when the step began)
    before = local.sample("work").processed
    local.step(5000)
    # in (1 replica) and work (6) have input when the step begins (out drained its share in the
    # step before): 7 replicas share the 2 slots, and work gets 6/7 of 2 cores' worth
    assert local.sample("work").processed - before == 171


def test_a_chain_is_one_vertex_whose_replica_runs_every_member_and_pays_one_batch() -> None:
    spec = (
        Pipeline("c")
        .source("in", generator={"rate": 1})
        .map("work", "tidal.examples.udfs:upper", scale={"max": 8})
        .sink("out", "blackhole")
        .build()
    )
    models = {
        "in": VertexModel(4000.0, batch_seconds=0.2),
        "work": VertexModel(250.0, startup_seconds=12.0, batch_seconds=0.3),
        "out": VertexModel(4000.0, batch_seconds=0.3),
    }
    folded, chain_models = chained(spec, models)
    assert [v.name for v in folded.vertices] == ["in"] and folded.vertex("in").kind == "monovertex"
    assert folded.vertex("in").scale.max == 8  # the scale block work asked for
    model = chain_models["in"]
    assert model.capacity == pytest.approx(1 / (1 / 4000 + 1 / 250 + 1 / 4000))
    assert (model.startup_seconds, model.batch_seconds) == (12.0, 0.2)  # the slowest start, one batch
    result = simulate(folded, Trace("steady", (300.0,) * 120), "numaflow", chain_models)
    arrived, delivered, held = result.conservation["in"]
    assert arrived == delivered + held and delivered > 0
