"""What a client may POST to an HTTP source: bodies, ids, and refusals that name the problem."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal.request.messages import BadRequest, parse


def test_an_array_is_a_batch_and_a_key_names_its_messages():
    parsed = parse("application/json", b'[{"a": 1}, {"b": 2}]', {"Idempotency-Key": "k"})
    assert parsed.payloads == [b'{"a":1}', b'{"b":2}'] and parsed.ids == ["k/0", "k/1"]


def test_json_lines_skip_blank_lines_and_a_message_id_names_one_message():
    parsed = parse("application/x-ndjson; charset=utf-8", b'{"a":1}\n\n', {"X-Message-Id": "m-1"})
    assert parsed.payloads == [b'{"a":1}'] and parsed.ids == ["m-1"]


def test_without_a_key_ids_are_random_and_distinct():
    one = parse("application/json", b"{}", {})
    two = parse("application/json", b"{}", {})
    assert one.ids != two.ids


@pytest.mark.parametrize(
    ("content_type", "body", "headers", "status", "words"),
    [
        ("application/json", b"{", {}, 400, "not valid JSON"),
        ("application/x-ndjson", b'{"a":1}\n{', {}, 400, "line 2"),
        ("application/json", b"[]", {}, 400, "no message"),
        ("text/plain", b"hi", {}, 415, "application/x-ndjson"),
        ("application/json", b"[1,2]", {"X-Message-Id": "m"}, 400, "use Idempotency-Key"),
        ("application/json", b"1", {"Idempotency-Key": "a b"}, 400, "visible ASCII"),
        ("application/json", b"1", {"Idempotency-Key": "k", "X-Message-Id": "m"}, 400, "not both"),
    ],
)
def test_refusals_name_the_problem(content_type, body, headers, status, words):
    with pytest.raises(BadRequest) as info:
        parse(content_type, body, headers)
    assert info.value.status == status and words in info.value.problem


@given(st.lists(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5)), min_size=1))
def test_every_message_survives_as_json(values):
    parsed = parse("application/json", json.dumps(values).encode(), {"Idempotency-Key": "k"})
    assert [json.loads(p) for p in parsed.payloads] == values
    assert len(set(parsed.ids)) == len(values)


@pytest.mark.parametrize("content_type", ["", "text/plain", "application/json", "application/octet-stream"])
def test_under_raw_bodies_any_body_is_one_message_as_it_came(content_type):
    """Numaflow's HTTP source: ``curl -d "hello world"`` is one message, whatever its type."""
    body = b"[1, 2] hello \xff"
    parsed = parse(content_type, body, {"x-numaflow-id": "n-1"}, raw=True)
    assert parsed.payloads == [body] and parsed.ids == ["n-1"] and parsed.event_time is None
    with pytest.raises(BadRequest, match="empty body"):
        parse(content_type, b"", {}, raw=True)


def test_numaflows_headers_name_the_message_and_its_event_time_case_insensitively():
    parsed = parse("application/json", b"7", {"X-Numaflow-Id": "a", "X-NUMAFLOW-EVENT-TIME": "1663006726000"})
    assert parsed.ids == ["a"] and parsed.event_time == 1663006726.0
    assert parse("application/json", b"7", {"x-numaflow-id": "a", "X-Message-Id": "a"}).ids == ["a"]
    for headers, words in [
        ({"x-numaflow-event-time": "yesterday"}, "milliseconds since 1970"),
        ({"x-numaflow-keys": "caf\u00e9"}, "not printable ASCII"),
        ({"x-numaflow-id": "a", "X-Message-Id": "b"}, "not both"),
        ({"x-numaflow-id": "has space"}, "visible ASCII"),
    ]:
        with pytest.raises(BadRequest, match=words) as err:
            parse("application/json", b"7", headers, raw=True)
        assert err.value.status == 400


def test_a_post_to_another_vertexs_path_is_refused_naming_the_right_one():
    from tidal.request.messages import wrong_vertex

    assert wrong_vertex(None, "in") is None and wrong_vertex("in", "in") is None
    assert wrong_vertex("orders", "orders-http", "orders") is None  # an HTTP MonoVertex's receivers
    assert "POST to / or /vertices/in" in (wrong_vertex("out", "in") or "")
    assert wrong_vertex("orders", "orders-http") is not None  # no alias: only the vertex's own name


@pytest.mark.parametrize(
    ("header", "keys"),
    [
        pytest.param("key1", ["key1"], id="one"),
        pytest.param("key1,key2,key3", ["key1", "key2", "key3"], id="several"),
        pytest.param("key1 , key2 ,\tkey3", ["key1", "key2", "key3"], id="whitespace-trimmed"),
        pytest.param("user 123,region-us", ["user 123", "region-us"], id="inner-space-kept"),
        pytest.param("key1,,key2,", ["key1", "key2"], id="empty-items-dropped"),
        pytest.param("", [], id="empty-header"),
        pytest.param(" , ,,", [], id="only-commas-and-spaces"),
    ],
)
def test_numaflow_keys_are_split_trimmed_and_empty_items_dropped_as_numaflow_does(header, keys):
    """Numaflow's ``parse_keys_from_header`` (rust/extns/numaflow-http): the same cases."""
    parsed = parse("application/json", b"[1, 2]", {"X-Numaflow-Keys": header})
    assert parsed.keys == keys and len(parsed.payloads) == 2


def test_without_the_keys_header_messages_have_no_keys():
    assert parse("application/json", b"[1, 2]", {}).keys == []
    assert parse("", b"raw", {"x-numaflow-id": "m"}, raw=True).keys == []
