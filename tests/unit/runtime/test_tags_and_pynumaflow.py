"""Tagged outputs and pynumaflow handlers through the UDF wrapper: tags kept per output, DROP
counted, ids deterministic, a Datum that carries the message's payload and source time."""

from __future__ import annotations

from collections.abc import AsyncIterable
from datetime import UTC, datetime
from typing import ClassVar

import pyarrow as pa
import pytest
from pynumaflow.mapper import Datum, Mapper, Message, Messages
from pynumaflow.mapstreamer import Message as StreamMessage

from tidal import Message as TidalMessage
from tidal import errors
from tidal.spark.query.udf import Transform
from tidal.spec.model import SinkSpec, UdfSpec

IDS = ["a", "b", "c"]
PAYLOADS = [b"1", b"2", b"3"]
TIMES = [100.0, 101.0, 102.5]


def make(kind: str, fn, *, dead_letter: bool = False, retries: int = 0) -> Transform:
    spec = UdfSpec(**{kind: fn}, retries=retries, dead_letter=SinkSpec(blackhole={}) if dead_letter else None)
    return Transform("v", spec, dead_letter=dead_letter)


def parity(payload: bytes) -> TidalMessage:
    return TidalMessage(payload, tags=("even",) if int(payload) % 2 == 0 else ("odd",))


def test_a_map_that_returns_tagged_messages_keeps_each_outputs_tags():
    out = make("map", parity).apply(IDS, PAYLOADS)
    assert out.ids.to_pylist() == IDS
    assert out.payloads.to_pylist() == PAYLOADS
    assert out.tags == [("odd",), ("even",), ("odd",)]


def test_plain_bytes_after_a_tagged_message_are_untagged_and_nothing_is_called_twice():
    calls: list[bytes] = []

    def mixed(payload: bytes) -> object:
        calls.append(payload)
        return TidalMessage(payload, ("x",)) if payload == b"2" else payload

    out = make("map", mixed).apply(IDS, PAYLOADS)
    assert calls == PAYLOADS  # the switch to the careful path did not call the function again
    assert out.tags == [(), ("x",), ()]


def test_drop_is_counted_and_goes_nowhere():
    out = make("map", lambda p: TidalMessage.to_drop() if p == b"2" else p).apply(IDS, PAYLOADS)
    assert out.ids.to_pylist() == ["a", "c"]
    assert out.dropped == 1
    assert out.times(pa.array(TIMES)).to_pylist() == [100.0, 102.5]  # each output keeps its input's time


def test_a_wrong_return_type_is_a_failed_attempt_with_its_reason():
    with pytest.raises(errors.UdfError, match="bytes, str or a Message, got int"):
        make("map", lambda p: 7).apply(IDS, PAYLOADS)


def even_odd(keys: list[str], datum: Datum) -> Messages:
    """numaflow-python's examples/map/even_odd, unchanged but for the number's encoding."""
    num = int(datum.value)
    tags = ["even-tag"] if num % 2 == 0 else ["odd-tag"]
    return Messages(Message(datum.value, keys=["even" if num % 2 == 0 else "odd"], tags=tags))


class Flatmap(Mapper):
    """numaflow-python's examples/map/flatmap."""

    def handler(self, keys: list[str], datum: Datum) -> Messages:
        messages = Messages()
        for s in datum.value.decode("utf-8").split(","):
            messages.append(Message(str.encode(s)))
        return messages


async def stream(_: list[str], datum: Datum) -> AsyncIterable[StreamMessage]:
    """numaflow-python's examples/mapstream/flatmap_stream (the function form)."""
    for s in datum.value.decode().split(","):
        yield StreamMessage(str.encode(s))


def test_a_pynumaflow_function_handler_tags_its_messages_and_keeps_ids():
    out = make("pynumaflow", even_odd).apply(IDS, PAYLOADS, pa.array(TIMES))
    assert out.ids.to_pylist() == IDS  # one message out: the input's id
    assert out.tags == [("odd-tag",), ("even-tag",), ("odd-tag",)]


def test_a_mapper_class_and_an_async_stream_split_into_numbered_ids():
    for handler in (Flatmap, Flatmap(), stream):
        out = make("pynumaflow", handler).apply(["m", "n"], [b"a,b", b"c"])
        assert out.ids.to_pylist() == ["m.0", "m.1", "n"]
        assert out.payloads.to_pylist() == [b"a", b"b", b"c"]
        assert out.tags is None


def test_the_datum_carries_the_payload_event_time_and_a_watermark_not_past_it():
    seen: list[Datum] = []

    def record(keys: list[str], datum: Datum) -> Messages:
        seen.append(datum)
        return Messages(Message.to_drop())

    out = make("pynumaflow", record).apply(IDS, PAYLOADS, pa.array(TIMES))
    assert [d.value for d in seen] == PAYLOADS
    assert [d.event_time for d in seen] == [datetime.fromtimestamp(t, UTC) for t in TIMES]
    assert all(d.watermark <= d.event_time for d in seen)
    assert out.dropped == 3 and len(out.ids) == 0


def test_a_pynumaflow_handler_that_raises_goes_to_the_dead_letter_with_its_payload():
    def boom(keys: list[str], datum: Datum) -> Messages:
        if datum.value == b"2":
            raise ValueError("two")
        return Messages(Message(datum.value))

    out = make("pynumaflow", boom, dead_letter=True, retries=1).apply(IDS, PAYLOADS, pa.array(TIMES))
    assert out.ids.to_pylist() == ["a", "c"]
    [(dead_id, dead_payload, error)] = out.dead
    assert (dead_id, dead_payload) == ("b", b"2")
    assert error.startswith("ValueError: two\n") and 'raise ValueError("two")' in error  # the traceback


def test_a_handler_returning_bytes_is_told_to_return_messages():
    with pytest.raises(errors.UdfError, match="must return Messages"):
        make("pynumaflow", lambda keys, datum: datum.value).apply(IDS, PAYLOADS)


class Collect:
    """A pynumaflow Sinker as numaflow-python's examples write one; fails the ids it is told to."""

    written: ClassVar[list[tuple[str, bytes, datetime]]] = []

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.fail = fail

    def handler(self, datums):
        from pynumaflow.sinker import Response, Responses

        responses = Responses()
        for d in datums:
            if d.id in self.fail:
                responses.append(Response.as_failure(d.id, "disk full"))
            else:
                Collect.written.append((d.id, d.value, d.event_time))
                responses.append(Response.as_success(d.id))
        return responses


def test_a_pynumaflow_sink_gets_ids_payloads_and_event_times():
    from pynumaflow.sinker import Sinker

    from tidal.spark.sinks.pynumaflow import PynumaflowSink

    Collect.written = []
    sinker = type("Sink", (Collect, Sinker), {})()
    PynumaflowSink(sinker, "sink.pynumaflow").write(pa.array(IDS), pa.array(PAYLOADS), times=pa.array(TIMES))
    assert Collect.written == [
        (i, p, datetime.fromtimestamp(t, UTC)) for i, p, t in zip(IDS, PAYLOADS, TIMES, strict=True)
    ]


def test_a_failed_response_fails_the_task_with_the_handlers_reason():
    from tidal.spark.sinks.pynumaflow import PynumaflowSink

    sink = PynumaflowSink(Collect(fail=("b",)).handler, "vertices[out].sink.pynumaflow")
    with pytest.raises(
        RuntimeError,
        match=r"vertices\[out\]\.sink\.pynumaflow: 1 message\(s\) failed, the first 'b': disk full",
    ):
        sink.write(IDS, PAYLOADS)


def test_the_sdks_simple_source_reads_acks_and_reports_pending_through_the_adapter():
    from tidal.examples.numaflow import SimpleSource
    from tidal.spark.sources.pynumaflow import SourcerSource

    source = SourcerSource(SimpleSource, "source.pynumaflow")
    first = source.read(3)
    assert [m[:2] for m in first] == [("0:0", b"1"), ("0:1", b"2"), ("0:2", b"3")]
    assert all(isinstance(m[2], datetime) for m in first)  # the event time the source set
    assert source.read(3) == []  # the example reads nothing while offsets wait for their ack
    source.ack([m[0] for m in first])
    assert [m[:2] for m in source.read(2)] == [("0:3", b"4"), ("0:4", b"5")]
    assert source.pending() == 0.0


def test_something_that_is_not_a_sourcer_is_named():
    from tidal.spark.sources.pynumaflow import SourcerSource

    with pytest.raises(TypeError, match=r"source\.pynumaflow: Flatmap has no read_handler"):
        SourcerSource(Flatmap, "source.pynumaflow")


def test_segments_carry_keys_and_read_the_older_formats_without_them():
    from tidal.isb import segments

    batch = segments.as_segment(["a", "b"], [b"1", b"2"], [1.0, 2.0], [["k"], None])
    back = segments.decode(segments.encode(batch))
    assert back.column("keys").to_pylist() == [["k"], None]
    old = pa.RecordBatch.from_pydict({"id": ["x"], "payload": [b"p"], "t": [5.0]})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, old.schema) as writer:
        writer.write_batch(old)
    assert segments.decode(sink.getvalue()).to_pylist() == [
        {"id": "x", "payload": b"p", "t": 5.0, "keys": None}
    ]


def test_keys_a_handler_sets_replace_the_inputs_and_plain_outputs_keep_them():
    def key_by_parity(keys: list[str], datum: Datum) -> Messages:
        n = int(datum.value)
        return Messages(Message(datum.value, keys=["even" if n % 2 == 0 else "odd"]))

    seen: list[list[str]] = []

    def cat(keys: list[str], datum: Datum) -> Messages:
        seen.append(keys)
        return Messages(Message(datum.value, keys=keys))

    out = make("pynumaflow", key_by_parity).apply(IDS, PAYLOADS, pa.array(TIMES))
    keyed = out.keys_of(None)
    assert keyed.to_pylist() == [["odd"], ["even"], ["odd"]]
    make("pynumaflow", cat).apply(IDS, PAYLOADS, pa.array(TIMES), keyed)
    assert seen == [["odd"], ["even"], ["odd"]]  # the next handler's Datum.keys
    upper = make("map", lambda p: p + b"!").apply(IDS, PAYLOADS)
    assert upper.keys_of(keyed).to_pylist() == [["odd"], ["even"], ["odd"]]  # a plain map keeps them
    tagged = make("map", lambda p: TidalMessage(p, keys=("k",)) if p == b"2" else p).apply(IDS, PAYLOADS)
    assert tagged.keys_of(keyed).to_pylist() == [["odd"], ["k"], ["odd"]]


def test_a_source_transformer_assigns_the_event_time_as_numaflows_does():
    """numaflow-python's examples/sourcetransform/event_time_filter, in short: a new event time."""
    from pynumaflow.sourcetransformer import Message as TransformMessage
    from pynumaflow.sourcetransformer import Messages as TransformMessages
    from pynumaflow.sourcetransformer import SourceTransformer

    class Stamp(SourceTransformer):
        def handler(self, keys, datum):
            if datum.value == b"3":
                return TransformMessages(TransformMessage.to_drop(datum.event_time))
            return TransformMessages(TransformMessage(datum.value, datetime.fromtimestamp(2_000.0, UTC)))

    out = make("pynumaflow", Stamp).apply(IDS, PAYLOADS, pa.array(TIMES))
    assert out.ids.to_pylist() == ["a", "b"] and out.dropped == 1
    assert out.times(pa.array(TIMES)).to_pylist() == [2_000.0, 2_000.0]
