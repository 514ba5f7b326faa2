"""Durations: Go's ``time.ParseDuration`` and bare seconds, the one reader of every spec's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal import errors
from tidal.scaling.durations import go_duration, seconds, spec_seconds


@pytest.mark.parametrize(
    ("value", "expected"),
    [(5, 5.0), (0.25, 0.25), ("5", 5.0), ("2.5", 2.5), ("60s", 60.0), ("500ms", 0.5),
     ("2m", 120.0), ("1h", 3600.0), ("1m30s", 90.0), (" 1h30m ", 5400.0), ("10us", 1e-5)],
)  # fmt: skip
def test_seconds_reads_numbers_and_go_durations(value: object, expected: float) -> None:
    assert seconds(value) == pytest.approx(expected)


@pytest.mark.parametrize("value", [True, "ten", "1d", "5 s", "", "1m2", None])
def test_seconds_refuses_anything_else_naming_the_forms(value: object) -> None:
    with pytest.raises(ValueError, match=r"is not a duration: write a Go duration \(60s, 500ms, 2m, 1m30s\)"):
        seconds(value)


def test_spec_seconds_names_the_field_and_refuses_zero_when_positive() -> None:
    assert spec_seconds("1m30s", "spec.limits.rateLimit.rampUpDuration", positive=True) == 90.0
    assert spec_seconds("0s", "spec.x") == 0.0
    with pytest.raises(errors.SpecError, match=r"spec\.x: '0s' is not a positive duration"):
        spec_seconds("0s", "spec.x", positive=True)
    with pytest.raises(errors.SpecError, match=r"spec\.y: 'soon' is not a duration"):
        spec_seconds("soon", "spec.y")


@given(
    h=st.integers(min_value=0, max_value=48),
    m=st.integers(min_value=0, max_value=59),
    ms=st.integers(min_value=0, max_value=59_999),
)
def test_a_compound_duration_is_the_sum_of_its_parts(h: int, m: int, ms: int) -> None:
    text = f"{h}h{m}m{ms / 1000}s"
    assert go_duration(text) == pytest.approx(3600 * h + 60 * m + ms / 1000)
    assert seconds(text) == go_duration(text)
