"""Conditional forwarding in the writer: each output edge takes the messages its conditions match,
a message no edge takes is dropped and counted, and a replayed task writes the same pieces."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal import Message
from tidal.spark.query.writer import VertexWriter
from tidal.spec import parse_pipeline
from tidal.spec.model import UdfSpec
from tidal.spec.routing import ForwardConditions, TagConditions, forwards, tags_match
from tidal.testing import BufferRig


def tag_by_number(payload: bytes) -> Message:
    """``p<i>``: tagged even or odd; every third one also ``big``; p7 dropped."""
    i = int(payload[1:])
    if i == 7:
        return Message.to_drop()
    tags = ("even",) if i % 2 == 0 else ("odd",)
    return Message(payload, tags + (("big",) if i % 3 == 0 else ()))


def _ranges(first: int, last: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"first": [first], "last": [last]})


@pytest.fixture
def rig(tmp_path):
    with BufferRig(tmp_path) as rig:
        yield rig


def test_each_edge_takes_what_its_conditions_match_and_the_rest_is_dropped_and_counted(rig):
    rig.fill("in", 10)
    for name in ("evens", "odd-or-big", "not-big"):
        rig.buffer(name)
    config = rig.config(
        "tagger",
        outputs=("evens", "odd-or-big", "not-big"),
        udf=UdfSpec(map=tag_by_number),
        routes=[("and", ("even",)), ("or", ("odd", "big")), ("not", ("big", "odd"))],
    )
    written = VertexWriter(config).write(iter([_ranges(1, 10)]))
    payloads = {
        name: [p for _, _, p in rig.store.open(name).read(0, 100)] for name in ("evens", "odd-or-big")
    }
    assert payloads["evens"] == [b"p0", b"p2", b"p4", b"p6", b"p8"]
    assert payloads["odd-or-big"] == [b"p0", b"p1", b"p3", b"p5", b"p6", b"p9"]
    assert rig.ids("not-big") == ["tagger:m2", "tagger:m4", "tagger:m8"]
    # p7 is DROP; every other message went somewhere: 9 written, 1 dropped
    assert written.steps[0].dropped == 1 and written.written == 9

    # A replay of the task writes the same pieces: nothing doubles.
    VertexWriter(config).write(iter([_ranges(1, 10)]))
    assert rig.ids("not-big") == ["tagger:m2", "tagger:m4", "tagger:m8"]


def test_a_message_that_matches_no_edge_is_dropped_and_counted(rig):
    rig.fill("in", 4)
    rig.buffer("evens")
    config = rig.config(
        "tagger", outputs=("evens",), udf=UdfSpec(map=tag_by_number), routes=[("or", ("even",))]
    )
    written = VertexWriter(config).write(iter([_ranges(1, 4)]))
    assert rig.ids("evens") == ["tagger:m0", "tagger:m2"]
    assert written.steps[0].dropped == 2 and written.written == 2


TAGS = st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4)


@given(operator=st.sampled_from(["or", "and", "not"]), values=TAGS, tags=st.none() | TAGS)
def test_the_rule_is_numaflows_set_logic(operator, values, tags):
    """numaflow-core's shared/forward.rs, restated as sets."""
    conditions = ForwardConditions(tags=TagConditions(operator=operator, values=values))
    have, want = set(tags or ()), set(values)
    expected = (
        True
        if not want
        else {"or": bool(want & have), "and": want <= have, "not": not (want & have)}[operator]
    )
    assert forwards(tags, conditions) is expected
    assert tags_match(operator, values, tags or ()) is expected
    assert forwards(tags, None) is True


def _spec(conditions: dict | None, udf: dict | None = None) -> dict:
    return {
        "name": "p",
        "vertices": [
            {"name": "in", "source": {"generator": {}}},
            {"name": "f", "udf": udf or {"map": "tidal.examples.udfs:upper", "tags": ["even", "odd"]}},
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [
            {"from": "in", "to": "f"},
            {"from": "f", "to": "out", **({"conditions": conditions} if conditions else {})},
        ],
    }


def test_the_operator_defaults_to_or_and_a_wrong_one_names_the_field():
    spec = parse_pipeline(_spec({"tags": {"values": ["even"]}}))
    assert spec.edges[1].conditions.tags.operator == "or"
    with pytest.raises(Exception, match=r"edges\[1\]\.conditions\.tags\.operator"):
        parse_pipeline(_spec({"tags": {"operator": "xor", "values": ["even"]}}))


def test_a_condition_on_a_tag_the_udf_does_not_emit_names_the_tag_and_the_fix():
    with pytest.raises(Exception, match=r"'evn' is not among the tags 'f' emits \(even, odd\)") as err:
        parse_pipeline(_spec({"tags": {"values": ["evn"]}}))
    assert "edges[1].conditions.tags.values" in str(err.value)


def test_conditions_after_a_source_or_an_arrow_udf_cannot_work_and_say_so():
    bad = _spec(None)
    bad["edges"][0]["conditions"] = {"tags": {"values": ["x"]}}
    with pytest.raises(Exception, match="only a UDF tags messages"):
        parse_pipeline(bad)
    with pytest.raises(Exception, match=r"Arrow UDF \(batch: arrow\), which cannot tag"):
        parse_pipeline(
            _spec({"tags": {"values": ["x"]}}, {"map": "tidal.examples.udfs:upper", "batch": "arrow"})
        )


def test_a_conditional_edge_keeps_its_buffer_and_the_plan_says_why():
    from tidal.spec.chains import plan_chains

    plan = plan_chains(parse_pipeline(_spec({"tags": {"values": ["even"]}})))
    assert any("conditions" in line and "not chained" in line for line in plan.describe())


def test_a_vertex_watermark_is_the_source_time_of_the_oldest_message_it_has_not_processed(rig):
    from tidal.spark.run.status import oldest_pending

    buffer = rig.buffer("in")
    assert oldest_pending(buffer) is None
    buffer.append_batch(
        "k", ["a", "b", "c"], [b"1", b"2", b"3"], [1_700_000_000.0, 1_700_000_001.5, 1_700_000_002.0]
    )
    assert oldest_pending(buffer) == "2023-11-14T22:13:20.000Z"
    buffer.commit(buffer.committed() + 2)
    assert oldest_pending(buffer) == "2023-11-14T22:13:22.000Z"
