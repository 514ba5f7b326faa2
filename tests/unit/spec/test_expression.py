"""Numaflow's filter builtin: its expression language as Numaflow's own tests use it
(pkg/udf/builtin/filter/filter_test.go and pkg/shared/expr/eval_bool_test.go, before 1.6)."""

from __future__ import annotations

import base64
import re

import pytest

from tidal import errors
from tidal.spark.query.udf import Transform
from tidal.spec import parse_pipeline
from tidal.spec.expression import compile_filter
from tidal.spec.model import UdfSpec

JSON_MSG = b'{"test": 21, "item": [{"id": 1, "name": "numa"},{"id": 2, "name": "numa"}]}'
STR_MSG = b"welcome to numaflow"
BASE64_MSG = base64.b64encode(STR_MSG)


@pytest.mark.parametrize(
    ("expression", "payload", "kept"),
    [
        ("int(json(payload).item[1].id) == 2", JSON_MSG, True),  # "Json expression valid"
        ("int(json(payload).item[1].id) == 3", JSON_MSG, False),  # "Json expression invalid"
        ("sprig.contains('hello', payload)", STR_MSG, False),  # "String expression invalid"
        ("sprig.contains('numaflow', sprig.b64dec(payload))", BASE64_MSG, True),  # "base64 expression valid"
        ("int(json(payload).id) < 100 && json(payload).msg == 'hello'", b'{"id": 99, "msg": "hello"}', True),
        (
            "int(json(payload).id) < 100 && json(payload).msg == 'hello'",
            b'{"id": 100, "msg": "hello"}',
            False,
        ),
        ("json(payload).a == 'b' || !(json(payload).c != nil)", b'{"a": "x"}', True),
        ('json(payload).a == "b&&c"', b'{"a": "b&&c"}', True),  # operators inside quotes stay text
        ("int(json(payload).id) < 100", b"not json", False),  # fails: dropped, as Numaflow drops it
        ("int(json(payload).id) < 100", b'{"name": "no id"}', False),
        ("len(json(payload).item) >= 2 and json(payload).test % 2 == 1", JSON_MSG, True),
    ],
)
def test_numaflows_filter_cases(expression, payload, kept):
    assert compile_filter(expression)(payload) is kept


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("ab\nc", "does not parse"),  # "invalid expression" (Numaflow accepted it and dropped all)
        ("__import__('os')", "__import__() is not supported"),
        ("sprig.env('HOME') == ''", "sprig.env is not supported"),
        ("json(payload).__class__", "__class__"),
        ("lambda: 1", "Lambda"),
        ("[x for x in payload]", "ListComp"),
        ("secret == 1", "'secret' is not known"),
    ],
)
def test_what_is_outside_the_language_is_refused_with_the_reason(expression, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        compile_filter(expression)


def test_a_builtin_filter_runs_as_a_filter_step_and_a_bad_one_names_the_field():
    spec = UdfSpec(builtin={"name": "filter", "kwargs": {"expression": "int(json(payload).id) < 100"}})
    out = Transform("f", spec, dead_letter=False).apply(["a", "b", "c"], [b'{"id": 5}', b'{"id": 500}', b"x"])
    assert out.ids.to_pylist() == ["a"]
    cat = Transform("c", UdfSpec(builtin={"name": "cat"}), dead_letter=False).apply(["a"], [b"p"])
    assert cat.payloads.to_pylist() == [b"p"]
    bad = {
        "name": "p",
        "vertices": [
            {"name": "in", "source": {"generator": {}}},
            {"name": "f", "udf": {"builtin": {"name": "filter", "kwargs": {"expression": "os.system('x')"}}}},
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "in", "to": "f"}, {"from": "f", "to": "out"}],
    }
    with pytest.raises(errors.SpecError, match=r"vertices\[1\]\.udf\.builtin.*kwargs\.expression"):
        parse_pipeline(bad)


# -- the functions Numaflow's docs name, with Go's values (tidal.spec.expression_functions) ---------------


@pytest.mark.parametrize(
    ("expression", "payload", "value"),
    [
        ("int(object(payload).id) > 100", b'{"id": 101}', True),  # the builtin-functions README's filter
        ("int(object(payload).id) > 100", b'{"id": 100}', False),
        ("string(json(payload).amount)", b'{"amount": 99}', "99"),  # a JSON number is Go's float64
        ("string(json(payload).amount)", b'{"amount": 1673239888123}', "1.673239888123e+12"),
        ("string(json(payload).amount)", b'{"amount": 0.00001}', "1e-05"),
        ("string(json(payload).missing)", b"{}", ""),
        ("sprig.trim(string(json(payload).timestamp))", b'{"timestamp": "  2021-01-18 "}', "2021-01-18"),
        ("sprig.contains('James', json(payload).name)", b'{"name": "James Bond"}', True),
        ("int(json(sprig.b64dec(payload)).id) < 100", base64.b64encode(b'{"id": 7}'), True),
        ("sprig.b64dec(payload)", b"%%%", "illegal base64 data at input byte 0"),  # sprig returns the error
        ("sprig.trimAll('$', payload)", b"$5.00$", "5.00"),
        ("sprig.substr(0, 5, payload)", b"hello world", "hello"),
        ("sprig.trunc(-5, payload)", b"hello world", "world"),
        ("sprig.nospace(payload)", b"h e\tl\nlo", "hello"),
        ("sprig.title(payload)", b"hello wide_world", "Hello Wide_world"),
        ("sprig.squote(json(payload).a)", b'{"a": 1.5}', "'1.5'"),
        ("sprig.atoi(payload)", b"12x", 0),
        ("sprig.join('-', sprig.splitList(',', payload))", b"a,b,c", "a-b-c"),
        ("sprig.regexFind('[0-9]+', payload)", b"abc123def", "123"),
        ("sprig.default('none', json(payload).a)", b'{"a": ""}', "none"),
        ("sprig.ternary('big', 'small', int(json(payload).n) > 9)", b'{"n": 10}', "big"),
        ("sprig.coalesce(json(payload).a, json(payload).b)", b'{"a": 0, "b": "x"}', "x"),
        (
            "sprig.sha256sum(payload)",
            b"abc",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
        ("sprig.b32enc(payload)", b"numa", "NZ2W2YI="),
        ("sprig.b32dec(sprig.b32enc(payload))", b"numa", "numa"),
    ],
)
def test_the_functions_give_what_numaflows_give(expression, payload, value):
    assert compile_filter(expression).evaluate(payload) == value


@pytest.mark.parametrize(
    ("expression", "payload", "text"),
    [
        ("json(payload).t", b'{"t": 1673239888}', "1.673239888e+09"),  # Go's %v of a float64
        ("json(payload).t", b'{"t": 123456}', "123456"),
        ("json(payload).t", b'{"t": true}', "true"),
        ("json(payload).t", b"{}", "<nil>"),
        ("json(payload).t", b'{"t": [1, "a"]}', "[1 a]"),
        ("json(payload).t", b'{"t": {"b": 2, "a": 1}}', "map[a:1 b:2]"),
        ("int(json(payload).t)", b'{"t": 1673239888}', "1673239888"),
    ],
)
def test_a_string_expression_is_gos_percent_v_of_its_value(expression, payload, text):
    assert compile_filter(expression).text(payload) == text


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("sprig.now()", "sprig.now is not supported"),  # the clock: a replay would differ
        ("sprig.randAlpha(5)", "sprig.randAlpha is not supported"),
        ("sprig.env('HOME')", "sprig.env is not supported"),
        ("sprig.substr(9, 20, payload) == ''", ""),  # parses; fails when it runs (Go's slice panics)
    ],
)
def test_the_clock_randomness_and_the_environment_stay_refused(expression, words):
    if words:
        with pytest.raises(ValueError, match=re.escape(words)):
            compile_filter(expression)
    else:
        assert compile_filter(expression)(b"short") is False
