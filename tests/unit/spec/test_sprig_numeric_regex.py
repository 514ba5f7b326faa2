"""Sprig's arithmetic and regex functions as Numaflow's expressions reach them (``sprig.<name>``),
with the values sprig's own tables give (Masterminds/sprig numeric_test.go, regex_test.go) and Go's
integer rules (truncating division, ``cast.ToInt64``), and RE2's refusals when the spec is read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal.spec.expression import compile_filter
from tidal.spec.sprig_numeric import NUMERIC, to_int64


def value(expression: str, payload: bytes = b"") -> object:
    return compile_filter(expression).evaluate(payload)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("sprig.add(1, 2, 3)", 6),
        ("sprig.add1(1)", 2),
        ("sprig.sub(3, 2)", 1),
        ("sprig.mul(1, '2', 3, '4')", 24),  # numeric_test.go: strings cast to int64
        ("sprig.div(5, 4)", 1),
        ("sprig.div(-7, 2)", -3),  # Go truncates toward zero
        ("sprig.mod(-7, 2)", -1),  # the sign of the first number
        ("sprig.max(1, 2, 3)", 3),
        ("sprig.min(2, 1, 3)", 1),
        ("sprig.biggest(1, 9, 3)", 9),
        ("sprig.int64('0x10')", 16),  # cast.ToInt64 reads Go's base prefixes
        ("sprig.int64('010')", 8),
        ("sprig.int64('not a number')", 0),  # what does not convert is 0
        ("sprig.toDecimal('777')", 511),  # numeric_test.go: octal text to its value
        ("sprig.addf(1.5, 2.2, 3)", 6.7),  # decimal arithmetic, as sprig's
        ("sprig.divf(5, 4, 2)", 0.625),
        ("sprig.floor(1.9)", 1.0),
        ("sprig.ceil(1.1)", 2.0),
        ("sprig.round(3.745, 2)", 3.75),
    ],
)
def test_sprig_arithmetic_gives_sprigs_values(expression, expected):
    assert value(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("sprig.regexReplaceAll('a(x*)b', '-ab-axxb-', '${1}W')", "-W-xxW-"),  # Go's Expand
        ("sprig.regexReplaceAll('x*', 'abxd', '-')", "-a-b-d-"),  # an empty match after a match skipped
        ("sprig.regexReplaceAllLiteral('a(x*)b', '-ab-axxb-', '${1}')", "-${1}-${1}-"),
        ("sprig.regexMatch('^a$', 'a\\n')", False),  # Go's $ is the end of the text
        ("sprig.regexFindAll('a.', 'paranormal', -1)", ["ar", "an", "al"]),
        ("sprig.regexSplit('a', 'banana', 0)", []),
        ("sprig.regexSplit('z+', 'pizza', -1)", ["pi", "a"]),
        ("sprig.quote('a', 'b\"c')", '"a" "b\\"c"'),
    ],
)
def test_sprig_regex_and_quote_give_gos_values(expression, expected):
    assert value(expression) == expected


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("sprig.regexMatch('(a)\\\\1', payload)", "sprig.regexMatch"),  # a backreference: not RE2
        ("sprig.regexMatch('a(?=b)', payload)", "sprig.regexMatch"),  # a lookahead: not RE2
        ("sprig.camelcase(payload) == 'x'", "sprig.camelcase is not supported"),
    ],
)
def test_what_go_would_refuse_is_refused_when_the_spec_is_read(expression, words):
    with pytest.raises(ValueError, match=words):
        compile_filter(expression)


@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6).filter(bool))
def test_div_and_mod_truncate_as_go_does(a, b):
    quotient, remainder = NUMERIC["div"](a, b), NUMERIC["mod"](a, b)
    assert quotient * b + remainder == a
    assert abs(remainder) < abs(b) and (remainder == 0 or (remainder > 0) == (a > 0))


def test_int64_wraps_as_go_does():
    assert to_int64(2**63) == -(2**63)
