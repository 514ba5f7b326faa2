"""The rest of pynumaflow's handler kinds, run as pynumaflow's servers call them: a ``BatchMapper``
on a task's batch (outputs mapped back by id), a ``ReduceStreamer`` over a closed window (what it
put on its output), and the start-time rules that tell each kind apart. numaflow-python's own
examples (``tests/data/numaflow-python``, unchanged) where it has one."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pynumaflow.batchmapper import BatchMapper, BatchResponse, BatchResponses, Datum, Message
from pynumaflow.reducer import Datum as ReduceDatum

from tidal import errors
from tidal.spark.query.reduce import _Handler
from tidal.spark.query.udf import Transform
from tidal.spec import parse_pipeline
from tidal.spec.model import SinkSpec, UdfSpec
from tidal.spec.sdk_kinds import SdkKind, map_kind, reduce_kind

EXAMPLES = Path(__file__).parents[2] / "data" / "numaflow-python"
IDS = ["a", "b", "c"]


@pytest.fixture(autouse=True)
def _examples_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    for name in ("batchmap_flatmap", "reducestream_counter", "reducestream_sum"):
        sys.modules.pop(name, None)


def make(fn, *, dead_letter: bool = False, retries: int = 0) -> Transform:
    spec = UdfSpec(
        pynumaflow=fn, retries=retries, dead_letter=SinkSpec(blackhole={}) if dead_letter else None
    )
    return Transform("v", spec, dead_letter=dead_letter)


# -- BatchMapper ----------------------------------------------------------------------------------


def test_the_sdks_batch_flatmap_example_maps_each_response_back_to_its_message():
    out = make("batchmap_flatmap:Flatmap").apply(IDS, [b"x,y", b"z", b"p,q,r"], pa.array([1.0, 2.0, 3.0]))
    assert out.ids.to_pylist() == ["a.0", "a.1", "b", "c.0", "c.1", "c.2"]
    assert out.payloads.to_pylist() == [b"x", b"y", b"z", b"p", b"q", b"r"]
    assert out.origin.to_pylist() == [0, 0, 1, 2, 2, 2]  # each output's input: its time and keys


class Tagging(BatchMapper):  # type: ignore[misc]
    """Answers in reverse order, with keys and tags: the answers are matched by id, not order."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def handler(self, datums: AsyncIterable[Datum]) -> BatchResponses:
        seen = [d async for d in datums]
        self.batches.append([d.id for d in seen])
        responses = BatchResponses()
        for d in reversed(seen):
            tag = "even" if int(d.value) % 2 == 0 else "odd"
            responses.append(BatchResponse.with_msgs(d.id, [Message(d.value, keys=[tag], tags=[tag])]))
        return responses


def test_a_batch_is_one_call_and_answers_are_matched_by_id_with_their_keys_and_tags():
    handler = Tagging()
    out = make(handler).apply(IDS, [b"1", b"2", b"3"], keys=pa.array([["k"], ["k"], None]))
    assert handler.batches == [IDS]  # one call for the task's batch
    assert out.ids.to_pylist() == IDS and out.payloads.to_pylist() == [b"1", b"2", b"3"]
    assert out.tags == [("odd",), ("even",), ("odd",)]
    assert out.keys == [["odd"], ["even"], ["odd"]]


async def one_short(datums: AsyncIterable[Datum]) -> BatchResponses:
    """A batch function (one argument) that forgets message b."""
    return BatchResponses(*[BatchResponse.from_id(d.id) async for d in datums if d.value != b"2"])


async def stranger(datums: AsyncIterable[Datum]) -> BatchResponses:
    return BatchResponses(*[BatchResponse.from_id(d.id) async for d in datums], BatchResponse.from_id("zz"))


@pytest.mark.parametrize(
    ("fn", "said"), [(one_short, "no BatchResponse for id 'b'"), (stranger, "id 'zz', which is not in")]
)
def test_a_missing_or_unknown_id_is_an_error_naming_it(fn, said):
    assert map_kind(fn) is SdkKind.BATCH_MAP
    with pytest.raises(errors.UdfError, match=said):
        make(fn).apply(IDS, [b"1", b"2", b"3"])


async def fails_on_two(datums: AsyncIterable[Datum]) -> BatchResponses:
    responses = BatchResponses()
    async for d in datums:
        if d.value == b"2":
            raise ValueError("two")
        responses.append(BatchResponse.with_msgs(d.id, [Message(d.value + b"!")]))
    return responses


def test_a_failing_batch_is_split_to_send_only_the_failing_message_to_the_dead_letter():
    out = make(fails_on_two, dead_letter=True, retries=1).apply(IDS, [b"1", b"2", b"3"])
    assert out.ids.to_pylist() == ["a", "c"] and out.payloads.to_pylist() == [b"1!", b"3!"]
    [(dead_id, dead_payload, error)] = out.dead
    assert (dead_id, dead_payload) == ("b", b"2") and error.startswith("ValueError: two")


def test_a_map_function_and_a_mapper_stay_per_message():
    from tidal.examples.numaflow import even_odd, flatmap

    assert map_kind(even_odd) is map_kind(flatmap) is map_kind(lambda keys, datum: None) is SdkKind.MAP
    assert map_kind(Tagging) is map_kind(Tagging()) is SdkKind.BATCH_MAP


# -- ReduceStreamer -------------------------------------------------------------------------------

START, END = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 1, tzinfo=UTC)


def _window(values: list[bytes]) -> list[ReduceDatum]:
    return [ReduceDatum(keys=["odd"], value=v, event_time=START, watermark=START, headers={}) for v in values]


def test_the_sdks_reduce_stream_counter_gives_its_early_and_final_results_at_the_windows_close():
    handler = _Handler("reducestream_counter:ReduceCounter", [0], "vertices[1].udf.reduce")
    out = handler(["odd"], _window([b"1"] * 25), START, END)
    # counter:11 twice (what Numaflow sends while the window is open), then the rest: counter:3
    assert [m.value for m in out] == [b"counter:11", b"counter:11", b"counter:3"]
    assert all(m.keys == ["odd"] for m in out)
    again = handler(["even"], _window([b"1"] * 2), START, END)  # a new instance per key and window
    assert [m.value for m in again] == [b"counter:2"]


def test_the_sdks_reduce_stream_sum_example():
    handler = _Handler("reducestream_sum:ReduceSum", [0], "vertices[1].udf.reduce")
    out = handler(["odd"], _window([b"60", b"50", b"7", b"3"]), START, END)
    assert [m.value for m in out] == [b"110", b"10"]


async def stream_function(keys, datums, output, md):  # type: ignore[no-untyped-def]
    """A ReduceStreamer written as a function: four arguments."""
    async for d in datums:
        await output.put(Message(d.value, keys=keys))
    await output.put(Message(str(md.interval_window.end.timestamp()).encode(), keys=keys))


def test_a_reduce_stream_function_is_told_by_its_four_arguments():
    assert reduce_kind(stream_function) is SdkKind.REDUCE_STREAM
    from tidal.examples.numaflow import ReduceCounter, reduce_counter

    assert reduce_kind(reduce_counter) is reduce_kind(ReduceCounter) is SdkKind.REDUCE
    out = _Handler(stream_function, [], "x")(["k"], _window([b"a", b"b"]), START, END)
    assert [m.value for m in out] == [b"a", b"b", str(END.timestamp()).encode()]


# -- the spec: streaming windows, and what is refused at start ------------------------------------


def _reduce_spec(handler: object, window: dict, args: list | None = None) -> dict:
    return {
        "name": "p",
        "vertices": [
            {"name": "in", "source": {"generator": {"rate": 1}}},
            {
                "name": "r",
                "udf": {"reduce": handler, "reduceArgs": args or [], "groupBy": {"window": window}},
            },
            {"name": "out", "sink": {"blackhole": {}}},
        ],
        "edges": [{"from": "in", "to": "r"}, {"from": "r", "to": "out"}],
    }


def test_a_reduce_streamer_runs_on_a_streaming_fixed_or_sliding_window():
    for window in (
        {"fixed": {"length": "60s", "streaming": True}},
        {"sliding": {"length": "60s", "slide": "10s", "streaming": True}},
    ):
        spec = parse_pipeline(_reduce_spec("reducestream_counter:ReduceCounter", window, [0]))
        group = spec.vertices[1].udf.group_by
        assert group is not None and group.window.streaming


@pytest.mark.parametrize(
    ("handler", "window", "path", "said"),
    [
        (
            "reducestream_counter:ReduceCounter",
            {"fixed": {"length": "60s"}},
            "vertices[1].udf.groupBy.window.fixed.streaming",
            "is a ReduceStreamer",
        ),
        (
            "tidal.examples.numaflow:ReduceCounter",
            {"sliding": {"length": "6s", "slide": "2s", "streaming": True}},
            "vertices[1].udf.groupBy.window.sliding.streaming",
            "not a ReduceStreamer",
        ),
        (
            "reducestream_counter:ReduceCounter",
            {"session": {"timeout": "10s"}},
            "vertices[1].udf.reduce",
            "fixed or sliding window",
        ),
    ],
    ids=["streamer-without-streaming", "reducer-with-streaming", "streamer-on-a-session"],
)
def test_a_handler_that_disagrees_with_its_window_is_refused_at_start_naming_the_field(
    handler, window, path, said
):
    with pytest.raises(errors.SpecError, match=said) as err:
        parse_pipeline(_reduce_spec(handler, window, [0]))
    assert err.value.path == path


class SessionCounter:
    """pynumaflow-lite's SessionReducer, in its shape (packages/pynumaflow-lite/tests/examples/
    session_reduce_counter_class.py): pynumaflow has no such class, and Tidal does not run it."""

    async def session_reduce(self, keys, datums):  # type: ignore[no-untyped-def]
        yield len([d async for d in datums])

    async def accumulator(self):  # type: ignore[no-untyped-def]
        return b""

    async def merge_accumulator(self, accumulator):  # type: ignore[no-untyped-def]
        return None


def test_a_session_reducer_of_pynumaflow_lites_shape_is_refused_naming_the_field():
    with pytest.raises(errors.SpecError, match="pynumaflow has no SessionReducer") as err:
        parse_pipeline(_reduce_spec(SessionCounter, {"session": {"timeout": "10s"}}))
    assert err.value.path == "vertices[1].udf.reduce"
    assert "write a pynumaflow Reducer" in (err.value.fix or "")


def test_a_reducer_class_that_cannot_be_built_with_reduce_args_is_refused_naming_them():
    window = {"fixed": {"length": "60s", "streaming": True}}
    with pytest.raises(errors.SpecError, match=r"ReduceCounter cannot be built with reduceArgs \[\]") as err:
        parse_pipeline(_reduce_spec("reducestream_counter:ReduceCounter", window))
    assert err.value.path == "vertices[1].udf.reduceArgs"
    assert "reduceArgs: [0]" in (err.value.fix or "")


@pytest.mark.parametrize(
    ("example", "handlers"),
    [
        ("batchmap-flatmap-pipeline.yaml", {"numaflow-python/batch-map-flatmap": "batchmap_flatmap:Flatmap"}),
        ("reducestream-counter-pipeline.yaml", {"compute-sum": "reducestream_counter:ReduceCounter"}),
        (
            "reducestream-sum-pipeline.yaml",
            {"numaflow-python/reduce-stream-sum": "reducestream_sum:ReduceSum"},
        ),
    ],
)
def test_the_examples_pipelines_convert_with_a_handlers_file(example, handlers):
    import yaml

    from tidal.spec import manifest

    data = manifest.convert(yaml.safe_load((EXAMPLES / example).read_text()), handlers).data
    if "reduce" in data["vertices"][2].get("udf", {}):
        data["vertices"][2]["udf"]["reduceArgs"] = [0]  # init_args=(0,): a handlers file names no arguments
    spec = parse_pipeline(data)
    assert [v.name for v in spec.vertices][-1] == "sink"
