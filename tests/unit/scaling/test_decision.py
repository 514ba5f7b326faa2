"""Decisions as values: lazy explanations, equality, replace, the event-log round trip."""

import pytest

from tidal.scaling import Decision, Rule


def test_reason_and_inputs_given_as_functions_render_once_on_read():
    calls = []

    def reason() -> str:
        calls.append("reason")
        return "avg pending 60000 at 10000/s over 2 replicas, target 3 s → 4"

    d = Decision("in", 1.0, 2, 4, Rule.SCALE_UP, reason, lambda: {"pending": 60000.0}, 4)
    assert calls == []
    assert d.reason.endswith("→ 4")
    assert d.reason.endswith("→ 4")
    assert calls == ["reason"]
    assert d.inputs["pending"] == 60000.0
    with pytest.raises(TypeError):
        d.inputs["pending"] = 1  # read-only view


def test_lazy_and_eager_decisions_are_equal_values():
    eager = Decision("v", 1.0, 1, 2, Rule.SCALE_UP, "why", {"a": 1}, 2)
    lazy = Decision("v", 1.0, 1, 2, Rule.SCALE_UP, lambda: "why", lambda: {"a": 1}, 2)
    assert eager == lazy
    assert hash(eager) == hash(lazy)
    assert eager != eager.replace(desired=3)


def test_replace_keeps_the_rest_and_refuses_unknown_fields():
    d = Decision("v", 1.0, 1, 2, Rule.SCALE_UP, "why")
    e = d.replace(desired=0, rule=Rule.SCALE_TO_ZERO)
    assert (e.vertex, e.current, e.desired, e.rule, e.reason) == ("v", 1, 0, Rule.SCALE_TO_ZERO, "why")
    with pytest.raises(TypeError, match="desried"):
        d.replace(desried=3)


def test_negative_desired_is_refused():
    with pytest.raises(ValueError, match="desired replicas must be >= 0"):
        Decision("v", 1.0, 1, -1, Rule.SCALE_DOWN, "why")


def test_round_trip_through_the_event_log_record():
    d = Decision("v", 1.5, 1, 2, Rule.SCALE_UP, lambda: "why", lambda: {"pending": 3.0}, 2)
    assert Decision.from_dict(d.to_dict()) == d
    assert d.explain() == "v: 1 → 2 [scale-up] why"
