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
