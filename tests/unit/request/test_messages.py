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
