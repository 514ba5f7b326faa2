"""Cron windows for sources (numaflow.md §1.9)."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tidal.errors import SpecError
from tidal.scaling import CronExpr, CronSchedule, CronSpec, NumaflowScale, Rule, decide

from .conftest import source


def ts(*args: int, tz=UTC) -> float:
    return datetime(*args, tzinfo=tz).timestamp()


def window(start: str, end: str, lo: int, hi: int) -> CronSchedule:
    return CronSchedule(CronExpr.parse(start), CronExpr.parse(end), lo, hi)


BUSINESS = window("0 0 9 * * MON-FRI", "0 0 17 * * MON-FRI", 4, 8)


def test_five_fields_are_rejected_with_a_fix():
    with pytest.raises(SpecError, match="six fields with seconds first"):
        CronExpr.parse("0 9 * * *")


@pytest.mark.parametrize(
    "bad", ["61 * * * * *", "* * 25 * * *", "* * * * 13 *", "*/0 * * * * *", "x * * * * *"]
)
def test_bad_fields(bad):
    with pytest.raises(SpecError):
        CronExpr.parse(bad)


def test_next_after_is_strictly_after():
    every_minute = CronExpr.parse("0 * * * * *")
    t = ts(2026, 11, 23, 10, 0, 0)
    assert every_minute.next_after(t, UTC) == t + 60
    assert every_minute.next_after(t - 1, UTC) == t


def test_names_steps_and_ranges():
    e = CronExpr.parse("*/15 0-30/10 8 1,15 JAN-MAR SUN")
    assert e.seconds == {0, 15, 30, 45}
    assert e.minutes == {0, 10, 20, 30}
    assert e.months == {1, 2, 3}
    assert e.weekdays == {0}


def test_sunday_as_seven():
    assert CronExpr.parse("0 0 0 * * 7").weekdays == {0}


def test_dom_or_dow_when_both_restricted():
    e = CronExpr.parse("0 0 12 1 * MON")  # the 1st of a month OR a Monday
    t = ts(2026, 11, 22, 0, 0, 0)  # a Sunday
    assert e.next_after(t, UTC) == ts(2026, 11, 23, 12, 0, 0)  # Monday comes first


def test_window_includes_start_and_excludes_end():
    monday_9 = ts(2026, 11, 23, 9, 0, 0)
    monday_17 = ts(2026, 11, 23, 17, 0, 0)
    assert BUSINESS.active(monday_9, UTC)
    assert BUSINESS.active(monday_17 - 1, UTC)
    assert not BUSINESS.active(monday_17, UTC)
    assert not BUSINESS.active(monday_9 - 1, UTC)
    assert not BUSINESS.active(ts(2026, 11, 22, 12, 0, 0), UTC)  # Sunday


def test_window_crossing_midnight():
    night = window("0 0 22 * * *", "0 0 6 * * *", 0, 1)
    assert night.active(ts(2026, 11, 23, 23, 30, 0), UTC)
    assert night.active(ts(2026, 11, 24, 3, 0, 0), UTC)
    assert not night.active(ts(2026, 11, 24, 12, 0, 0), UTC)


def test_timezone():
    tz = ZoneInfo("America/New_York")
    spec = CronSpec((BUSINESS,), tz, "America/New_York")
    assert spec.active_bounds(ts(2026, 11, 23, 10, 0, 0, tz=tz)) == (0, 4, 8)
    assert spec.active_bounds(ts(2026, 11, 23, 10, 0, 0)) is None  # 05:00 in New York


def test_first_active_schedule_wins():
    sundays = window("0 0 0 * * SUN", "0 0 0 * * MON", 1, 2)
    spec = CronSpec((BUSINESS, sundays))
    assert spec.active_bounds(ts(2026, 11, 23, 10, 0, 0)) == (0, 4, 8)
    assert spec.active_bounds(ts(2026, 11, 22, 10, 0, 0)) == (1, 1, 2)


def test_cron_below_window_min_steps_up_without_metrics():
    scale = NumaflowScale(max=10, cron=CronSpec((BUSINESS,)))
    now = ts(2026, 11, 23, 10, 0, 0)
    d = decide(scale, source(replicas=1, ready_replicas=1, last_scaled_at=now - 1000, partitions=()), now)
    assert (d.rule, d.desired) == (Rule.CRON_MIN, 3)


def test_cron_above_window_max_steps_down():
    scale = NumaflowScale(max=20, cron=CronSpec((BUSINESS,)))
    now = ts(2026, 11, 23, 10, 0, 0)
    d = decide(scale, source(replicas=12, ready_replicas=12, last_scaled_at=now - 1000), now)
    assert (d.rule, d.desired) == (Rule.CRON_MAX, 10)


def test_cron_respects_direction_cooldown():
    scale = NumaflowScale(
        max=10, scale_up_cooldown_seconds=300, scale_down_cooldown_seconds=60, cron=CronSpec((BUSINESS,))
    )
    now = ts(2026, 11, 23, 10, 0, 0)
    d = decide(scale, source(replicas=1, ready_replicas=1, last_scaled_at=now - 100), now)
    assert d.rule == Rule.SCALE_UP_COOLDOWN


def test_cron_window_bounds_apply_inside_window():
    scale = NumaflowScale(max=50, target_processing_seconds=3, cron=CronSpec((BUSINESS,)))
    now = ts(2026, 11, 23, 10, 0, 0)
    obs = source(replicas=5, ready_replicas=5, last_scaled_at=now - 1000)  # wants 10
    d = decide(scale, obs, now)
    assert (d.recommended, d.desired) == (8, 7)


def test_cron_only_for_sources():
    from .conftest import udf

    scale = NumaflowScale(max=10, cron=CronSpec((BUSINESS,)))
    now = ts(2026, 11, 23, 10, 0, 0)
    assert (
        decide(scale, udf(replicas=1, ready_replicas=1, last_scaled_at=now - 1000), now).rule != Rule.CRON_MIN
    )


def test_window_outside_base_bounds_is_rejected():
    with pytest.raises(SpecError, match=r"scale.cron.schedules\[0\].*base bounds"):
        NumaflowScale(max=5, cron=CronSpec((BUSINESS,)))
