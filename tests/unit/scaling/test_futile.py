"""The guards that hold a scale-up more replicas cannot help, in their one home: each holds alone,
in Numaflow's order, and nothing below their thresholds is held."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidal.scaling import NumaflowScale, Rule, decide
from tidal.scaling.futile import futile_scale_up
from tidal.scaling.sink_health import FAILING_SHARE

from .conftest import NOW, udf


def _held(
    throttled: bool = False,
    rate: float = 100.0,
    max_rate: float | None = None,
    failing_share: float | None = None,
) -> tuple[Rule, str] | None:
    return futile_scale_up(
        5,
        throttled=throttled,
        rate=rate,
        max_rate=max_rate,
        failing_share=failing_share,
        lookback_seconds=60.0,
    )


def test_each_guard_holds_alone_with_its_rule():
    assert _held() is None
    throttled = _held(throttled=True)
    assert throttled is not None and throttled[0] == Rule.RATE_LIMITED and "wanted 5" in throttled[1]
    at_limit = _held(rate=99.2, max_rate=100.0)  # a rate rounded up to the limit is at it
    assert at_limit is not None and at_limit[0] == Rule.RATE_LIMITED and "rate limit 100/s" in at_limit[1]
    failing = _held(failing_share=0.4)
    assert failing is not None and failing[0] == Rule.SINK_FAILING and "40% of writes retried" in failing[1]


def test_a_rate_limit_is_named_before_a_failing_sink_as_numaflow_checks_them():
    both = _held(throttled=True, failing_share=0.9)
    assert both is not None and both[0] == Rule.RATE_LIMITED


@given(
    rate=st.floats(0, 1e5),
    max_rate=st.floats(1, 1e5),
    share=st.floats(0, 1),
)
def test_below_every_threshold_nothing_is_held(rate: float, max_rate: float, share: float):
    held = _held(rate=rate, max_rate=max_rate, failing_share=share)
    below = rate <= max_rate - 1 and share < FAILING_SHARE
    if below:
        assert held is None
    if share >= FAILING_SHARE or rate >= max_rate:
        assert held is not None


def test_numaflows_rule_gives_the_guards_reason_word_for_word():
    d = decide(NumaflowScale(lookback_seconds=60), udf(pending=20_000, rate=100, sink_retried_share=0.4), NOW)
    assert d.recommended is not None  # what Numaflow's estimate wanted before the guard held it
    held = futile_scale_up(
        d.recommended, throttled=False, rate=100.0, max_rate=None, failing_share=0.4, lookback_seconds=60
    )
    assert held is not None and (d.rule, d.reason) == held
