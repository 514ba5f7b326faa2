"""The reduce reader's idle watermarks on real SQLite buffers, with time given: control rows only
for a quiet input with nothing upstream, none past the horizon, a join's seeds at each start,
the state kept for a restart, and the control rows left out of the reduce's processed count."""

from __future__ import annotations

from pathlib import Path

from tidal.isb.control import BatchRange
from tidal.scaling.idle import IdleParams
from tidal.spark.batch.idle import CONTROL_KEY, IdleWatch, Upstream, control_id, is_control
from tidal.spark.batch.idle_tracker import IdleTracker
from tidal.spark.query.reduce import ReduceWriter
from tidal.spec.model import UdfSpec
from tidal.spec.reduce import GroupBySpec
from tidal.testing import BufferRig

T0 = 1_700_000_000.0
NOW = 1_800_000_000.0
REDUCE = UdfSpec(
    reduce="tidal.examples.numaflow:ReduceCounter",
    group_by=GroupBySpec.model_validate({"window": {"fixed": {"length": "2s"}}}),
)
PARAMS = IdleParams(threshold=1.0, increment_by=2.0, step_interval=0.0)


def _rig(tmp_path: Path, origins: tuple[str, ...], params: IdleParams | None = PARAMS):
    rig = BufferRig(tmp_path)
    watch = IdleWatch(params, span=4.0, inputs=tuple(Upstream(o, (f"up-{o}",), ()) for o in origins))
    for o in origins:
        rig.buffer(f"up-{o}")
    from tidal.spark.batch.config import QueryConfig

    config = QueryConfig(
        "t", "sum", str(rig.db), str(tmp_path), "sum", (), udf=REDUCE, origins=origins, idle=watch
    )
    return rig, config, watch


def _send(rig: BufferRig, origin: str, times: list[float]) -> None:
    ids = [f"{origin}:m{t}" for t in times]
    rig.buffer("sum").append_batch(ids[0], ids, [b"1"] * len(ids), times, None)


def _controls(rig: BufferRig) -> list[tuple[str, float]]:
    batch = rig.buffer("sum").read_batch(1, rig.buffer("sum").last_seq())
    columns = [batch.column(c).to_pylist() for c in ("id", "t", "keys")]
    rows = zip(*columns, strict=True)
    out = []
    for message_id, t, keys in rows:
        if is_control(message_id):
            assert keys == [CONTROL_KEY]
            out.append((message_id.split(":", 1)[0], t))
    return out


def test_a_quiet_input_steps_until_every_window_holding_data_is_closed(tmp_path):
    rig, config, watch = _rig(tmp_path, ("a",))
    tracker = IdleTracker(config, watch, NOW)
    _send(rig, "a", [T0, T0 + 1.5])
    buffer = rig.buffer("sum")
    assert tracker.tick(buffer, NOW) == 0  # data just came
    assert tracker.tick(buffer, NOW + 0.5) == 0  # quiet for less than the threshold
    rig.buffer("up-a").append([b"x"], ["x"])  # something waits upstream: not idle
    assert tracker.tick(buffer, NOW + 2.0) == 0
    rig.buffer("up-a").commit(1)
    assert tracker.tick(buffer, NOW + 2.5) == 0  # busy upstream half a second ago
    assert tracker.tick(buffer, NOW + 3.0) == 1
    assert tracker.tick(buffer, NOW + 3.1) == 1  # stepInterval 0: every trigger
    assert tracker.tick(buffer, NOW + 3.2) == 0  # T0 + 5.5 reached the horizon T0 + 1.5 + 4
    assert _controls(rig) == [("a", T0 + 3.5), ("a", T0 + 5.5)]
    rig.close()


def test_the_state_is_kept_for_a_restart(tmp_path):
    rig, config, watch = _rig(tmp_path, ("a",))
    _send(rig, "a", [T0])
    IdleTracker(config, watch, NOW).tick(rig.buffer("sum"), NOW)
    rig.buffer("sum").commit(1)  # the reduce read it and Spark's commit log holds the batch
    restarted = IdleTracker(config, watch, NOW + 100)  # a new reader, nothing new in the buffer
    assert restarted.tick(rig.buffer("sum"), NOW + 100.5) == 0  # quiet since its start: a threshold
    assert restarted.tick(rig.buffer("sum"), NOW + 101) == 1
    assert _controls(rig) == [("a", T0 + 2)]
    rig.close()


def test_a_join_seeds_every_input_at_each_start_even_without_idle_source(tmp_path):
    rig, config, watch = _rig(tmp_path, ("a", "b"), params=None)
    assert IdleTracker(config, watch, NOW).tick(rig.buffer("sum"), NOW) == 2
    tracker = IdleTracker(config, watch, NOW + 5)  # a restart seeds again (Spark forgot them)
    assert tracker.tick(rig.buffer("sum"), NOW + 5) == 2
    assert tracker.tick(rig.buffer("sum"), NOW + 6) == 0
    assert _controls(rig) == [("a", 0.0), ("b", 0.0)] * 2
    rig.close()


def test_the_reduce_counts_no_control_row_and_no_range_twice(tmp_path):
    rig, config, _ = _rig(tmp_path, ("a",))
    _send(rig, "a", [T0, T0 + 1])
    key = control_id("a", T0 + 3)
    rig.buffer("sum").append_batch(key, [key], [b""], [T0 + 3], [[CONTROL_KEY]])
    writer = ReduceWriter(config)
    assert writer.messages_in(BatchRange(1, 3)) == 2
    rig.buffer("sum").commit(3)  # trimmed: a no-data batch finds this range recorded still
    assert writer.messages_in(BatchRange(1, 3)) == 0
    rig.close()
