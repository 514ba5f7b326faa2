"""Admission control: how much a vertex's next micro-batch may take.

The reader's planning code runs here in this process, on real SQLite, without Spark.
"""

from __future__ import annotations

import pytest

from tidal.isb import BufferLimits
from tidal.isb.control import ControlStore
from tidal.isb.sqlite import SqliteStore
from tidal.spark.batch.admission import admit, partition_batch
from tidal.spark.batch.config import QueryConfig
from tidal.spec import Limits


@pytest.fixture
def setup(tmp_path):
    db = tmp_path / "pipeline.db"
    store = SqliteStore(db)
    store.create("in", BufferLimits(max_length=100_000))
    out = store.create("out", BufferLimits(max_length=1000, usage_limit=0.8))
    control = ControlStore(db)

    def plan(outputs=("out",), vertex="v", shared=()):
        return QueryConfig(
            shared=shared,
            pipeline="t",
            vertex=vertex,
            db=str(db),
            run_dir=str(tmp_path),
            input="in",
            outputs=outputs,
            limits=Limits(read_batch_size=400, buffer_max_length=1000),
        )

    yield store, control, out, plan
    store.close()
    control.close()


def fill(buffer, n, tag="x"):
    buffer.append([b"p"] * n, [f"{tag}{i}" for i in range(n)])


def test_replicas_times_read_batch_when_the_output_has_room(setup):
    _, control, _, plan = setup
    control.set_replicas("v", 2)
    assert admit(plan(), 10, 100_000).end == 10 + 2 * 400
    assert admit(plan(), 10, 500).end == 500  # no further than what is there


def test_no_more_than_the_output_has_room_for(setup):
    _, control, out, plan = setup
    control.set_replicas("v", 2)
    fill(out, 700)  # 70 %: under the usage limit, but only 300 free
    assert admit(plan(), 0, 100_000).end == 300


def test_an_output_over_its_usage_limit_idles_the_vertex(setup):
    _, control, out, plan = setup
    control.set_replicas("v", 2)
    fill(out, 800)
    assert admit(plan(), 5, 100_000).end == 5


def test_zero_replicas_idles_the_vertex_and_a_sink_is_capped_by_replicas_only(setup):
    _, control, out, plan = setup
    control.set_replicas("v", 0)
    assert admit(plan(), 5, 100_000).end == 5
    control.set_replicas("v", 3)
    fill(out, 800)
    assert admit(plan(outputs=()), 5, 100_000).end == 5 + 3 * 400


def test_two_writers_of_one_buffer_never_admit_the_same_room(setup):
    # A join: v and w both write "out". Each admission claims the room its batch may fill, until
    # the writer's next admission (its batch landed by then: a query's batches run one by one),
    # so a second writer planning while the first one's batch is in flight sees that room taken.
    _, control, out, plan = setup
    control.set_replicas("v", 2)
    control.set_replicas("w", 2)
    fill(out, 200)  # 800 free
    v, w = plan(shared=(True,)), plan(vertex="w", shared=(True,))
    assert admit(v, 0, 100_000).end == 800
    assert admit(w, 0, 100_000).end == 0  # not the same 800 again: 1800 > 1000
    fill(out, 800, tag="v")  # v's batch lands
    out.commit(1000)  # and the join reads it all
    assert admit(v, 800, 800).end == 800  # v has nothing new: its claim goes
    assert admit(w, 0, 100_000).end == 800  # w gets the room
    control.set_replicas("w", 0)
    assert admit(w, 800, 100_000).end == 800  # stopped: w's claim goes too
    assert admit(v, 800, 100_000).end == 800 + 800


def test_a_flatmap_is_admitted_for_its_expansion(setup):
    _, control, out, plan = setup
    control.set_replicas("v", 2)
    control.record_batch("v", 0, tasks=2, rows=100, written=500)  # 5 out per message in
    fill(out, 500)
    assert admit(plan(), 0, 100_000).end == 500 // 5


def test_expansion_is_the_largest_of_the_recent_batches_and_never_below_one(tmp_path):
    control = ControlStore(tmp_path / "c.db")
    assert control.expansion("v") == 1.0  # nothing committed yet
    control.record_batch("v", 0, 2, rows=100, written=10)  # a filter
    assert control.expansion("v") == 1.0
    control.record_batch("v", 1, 2, rows=100, written=300)
    control.record_batch("v", 2, 2, rows=0, written=0)  # an empty batch says nothing
    control.record_batch("v", 3, 2, rows=100, written=200)
    assert control.expansion("v") == 3.0
    assert control.expansion("v", last=1) == 2.0
    control.close()


def test_a_closing_source_admits_nothing_and_a_reopened_one_admits_again(setup, tmp_path):
    from tidal.spec.model import GeneratorSpec, SourceSpec

    _, control, _, plan = setup
    control.set_replicas("v", 2)
    base = plan()
    source = QueryConfig(
        pipeline="t", vertex="v", db=base.db, run_dir=base.run_dir, input=None, outputs=("out",),
        limits=Limits(read_batch_size=400, buffer_max_length=1000),
        source=SourceSpec(generator=GeneratorSpec(rate=10)),
    )  # fmt: skip
    control.set_closing("v", True)
    assert admit(source, 10, 100_000).end == 10  # the batch in flight is the last
    assert admit(base, 10, 100_000).end == 810  # only sources close: the rest drains
    control.set_closing("v", False)
    assert admit(source, 10, 100_000).end == 810
    control.set_holding("v", True)  # a reduce whose state is being moved: any vertex holds
    assert admit(base, 10, 100_000).end == 10 and admit(source, 10, 100_000).end == 10
    control.set_holding("v", False)
    assert admit(base, 10, 100_000).end == 810


def test_a_batch_takes_no_more_replicas_than_the_vertex_has_task_slots(setup):
    """A scale-up waiting for executors: the batch is sized and split for the replicas that can
    run now, not for the count the controller set (the allocator's slots in the control record)."""
    _, control, _, plan = setup
    control.set_replicas("v", 6)
    control.set_slots({"v": 2, "w": 0})
    admission = admit(plan(outputs=()), 0, 100_000)
    assert admission == (2 * 400, 2)
    assert len(partition_batch(plan(outputs=()), 1, admission.end, admission.replicas)) == 2
    control.set_slots({"v": 0})  # a share of none: one replica still reads
    assert admit(plan(outputs=()), 0, 100_000) == (400, 1)
    control.set_slots({"v": 8})  # more slots than replicas: the controller's count
    assert admit(plan(outputs=()), 0, 100_000) == (6 * 400, 6)
    control.set_slots({})  # a local run: no cap
    control.set_replicas("v", 3)
    assert admit(plan(outputs=()), 0, 100_000) == (3 * 400, 3)
    assert control.slots("v") is None
