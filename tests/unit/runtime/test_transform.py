"""The UDF wrapper on Arrow batches: outputs, ids, retries counted exactly, failures located."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tidal import errors
from tidal.spark.query.udf import Transform
from tidal.spec.model import SinkSpec, UdfSpec

IDS = ["a", "b", "c", "d"]
PAYLOADS = [b"one", b"poison", b"three", b"four"]


def make(kind: str, fn, *, batch: str = "row", retries: int = 0, dead_letter: bool = False) -> Transform:
    spec = UdfSpec(
        **{kind: fn},
        batch=batch,
        retries=retries,
        dead_letter=SinkSpec(blackhole={}) if dead_letter else None,
    )
    return Transform("v", spec, dead_letter=dead_letter)


class Calls:
    """A UDF that counts its calls per payload and fails on ``poison``."""

    def __init__(self, fail_times: int = 10**9) -> None:
        self.calls: dict[bytes, int] = {}
        self.fail_times = fail_times

    def __call__(self, payload: bytes) -> bytes:
        self.calls[payload] = self.calls.get(payload, 0) + 1
        if payload == b"poison" and self.calls[payload] <= self.fail_times:
            raise ValueError("bad message")
        return payload.upper()


def test_a_map_keeps_the_id_column_and_converts_str_results():
    ids = pa.array(IDS)
    out = make("map", lambda p: p.decode().upper()).apply(ids, pa.array(PAYLOADS))
    assert out.ids is ids  # passed on untouched
    assert out.payloads.type == pa.binary()
    assert out.payloads.to_pylist() == [b"ONE", b"POISON", b"THREE", b"FOUR"]


def test_a_map_that_fails_is_retried_exactly_then_named_in_the_error():
    fn = Calls()
    with pytest.raises(errors.UdfError) as err:
        make("map", fn, retries=2).apply(IDS, PAYLOADS)
    assert fn.calls[b"poison"] == 3  # the first call and two retries, no more
    assert "'b'" in str(err.value) and "3 attempt(s)" in str(err.value) and "ValueError" in str(err.value)


def test_a_flaky_map_succeeds_on_a_retry_and_keeps_the_order():
    fn = Calls(fail_times=1)
    out = make("map", fn, retries=1).apply(IDS, PAYLOADS)
    assert fn.calls == {b"one": 1, b"poison": 2, b"three": 1, b"four": 1}
    assert out.ids.to_pylist() == IDS
    assert out.payloads.to_pylist() == [b"ONE", b"POISON", b"THREE", b"FOUR"]


def test_with_a_dead_letter_only_the_failing_message_is_set_aside():
    out = make("map", Calls(), retries=1, dead_letter=True).apply(IDS, PAYLOADS)
    assert out.ids.to_pylist() == ["a", "c", "d"]
    assert out.payloads.to_pylist() == [b"ONE", b"THREE", b"FOUR"]
    assert [d[:2] for d in out.dead] == [("b", b"poison")]
    assert out.dead[0][2].startswith("ValueError: bad message\n") and "in __call__" in out.dead[0][2]


def test_a_filter_masks_ids_and_payloads_and_rejects_non_bool():
    out = make("filter", lambda p: p != b"poison").apply(IDS, PAYLOADS)
    assert (out.ids.to_pylist(), out.payloads.to_pylist()) == (["a", "c", "d"], [b"one", b"three", b"four"])
    with pytest.raises(errors.UdfError, match="must return bool"):
        make("filter", lambda p: 1).apply(IDS, PAYLOADS)


def test_a_flatmap_numbers_its_outputs():
    out = make("flatmap", lambda p: p.split(b"e")).apply(["x", "y"], [b"one", b"three"])
    assert out.ids.to_pylist() == ["x.0", "x.1", "y.0", "y.1", "y.2"]
    assert out.payloads.to_pylist() == [b"on", b"", b"thr", b"", b""]
    with pytest.raises(errors.UdfError, match="iterable of bytes/str"):
        make("flatmap", lambda p: p).apply(["x"], [b"one"])


def test_an_arrow_map_result_becomes_the_column():
    import pyarrow.compute as pc

    out = make("map", lambda arr: pc.utf8_upper(arr.cast(pa.string())), batch="arrow").apply(IDS, PAYLOADS)
    assert out.payloads.type == pa.binary()
    assert out.payloads.to_pylist() == [b"ONE", b"POISON", b"THREE", b"FOUR"]
    with pytest.raises(errors.UdfError, match="one per message"):
        make("map", lambda arr: arr.slice(1), batch="arrow").apply(IDS, PAYLOADS)


def test_an_arrow_filter_takes_a_mask():
    import pyarrow.compute as pc

    out = make("filter", lambda arr: pc.not_equal(arr, b"poison"), batch="arrow").apply(IDS, PAYLOADS)
    assert out.ids.to_pylist() == ["a", "c", "d"]


def test_a_failing_arrow_batch_is_split_to_find_the_failing_messages():
    def fn(arr):
        values = arr.to_pylist()
        if b"poison" in values:
            raise ValueError("bad message")
        return [v.upper() for v in values]

    out = make("map", fn, batch="arrow", dead_letter=True).apply(IDS, PAYLOADS)
    assert out.ids.to_pylist() == ["a", "c", "d"]
    assert out.payloads.to_pylist() == [b"ONE", b"THREE", b"FOUR"]
    assert [d[0] for d in out.dead] == ["b"]


def test_an_empty_batch_calls_nothing():
    def never(_):
        raise AssertionError("called")

    out = make("map", never).apply([], [])
    assert len(out.ids) == len(out.payloads) == 0 and out.dead == []


TIMES = pa.array([10.0, 11.0, 12.0, 13.0], pa.float64())


def _flat(payload: bytes) -> list[bytes]:
    return [payload] * (len(payload) % 3)


@pytest.mark.parametrize(
    ("kind", "fn", "batch"),
    [
        ("map", bytes.upper, "row"),
        ("filter", lambda p: b"o" in p, "row"),
        ("filter", lambda a: pa.array([b"o" in v for v in a.to_pylist()]), "arrow"),
        ("flatmap", _flat, "row"),
        ("flatmap", lambda a: [_flat(v) for v in a.to_pylist()], "arrow"),
    ],
)
def test_every_output_keeps_the_source_time_of_the_input_it_came_from(kind, fn, batch):
    outcome = make(kind, fn, batch=batch).apply(IDS, PAYLOADS)
    by_id = dict(zip(IDS, TIMES.to_pylist(), strict=True))
    times = outcome.times(TIMES).to_pylist()
    assert len(times) == len(outcome.ids)
    for out_id, t in zip(outcome.ids.to_pylist(), times, strict=True):
        assert t == by_id[out_id.split(".")[0]]


def test_after_a_failure_the_careful_path_still_knows_where_each_output_came_from():
    outcome = make("map", Calls(), dead_letter=True).apply(IDS, PAYLOADS)
    assert outcome.ids.to_pylist() == ["a", "c", "d"]
    assert outcome.times(TIMES).to_pylist() == [10.0, 12.0, 13.0]
