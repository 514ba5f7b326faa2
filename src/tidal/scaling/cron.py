"""Cron scaling windows for sources (Numaflow ``scale.cron``, ``spec/numaflow.md`` §1.9).

A schedule ``{start, end, min, max}`` is active at time ``t`` iff the next firing of ``end`` after
``t`` comes before the next firing of ``start`` after ``t``: the window includes its start instant,
excludes its end instant, and may cross midnight. The first active schedule in list order wins and
its ``min``/``max`` replace the base bounds.

Expressions have six fields with seconds first (``sec min hour day-of-month month day-of-week``),
as robfig/cron does; five-field expressions are rejected, like upstream. Fields accept ``*``,
``?``, numbers, ``a-b``, ``*/n``, ``a-b/n``, ``a/n``, lists, and month/day names. When both
day-of-month and day-of-week are restricted, a day matches if either matches (robfig semantics).

The timezone is a ``tzinfo`` passed in by the spec layer (loading zone data is I/O).

Upstream's controller clamps to the base ``[min, max]`` afterwards, so the part of a window
outside the base bounds has no effect (issue #3632). Tidal accepts such a window as upstream does
and applies what takes effect: :func:`~tidal.scaling.numaflow_scale.normalise_scale` clamps it
into the base bounds and says so in a notice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from tidal import errors

__all__ = ["CronExpr", "CronSchedule", "CronSpec"]

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    )
}
_DAYS = {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
# (low, high, names) per field, seconds first
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("second", 0, 59, {}),
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
_SEARCH_YEARS = 5


def _parse_value(text: str, names: dict[str, int], field: str, path: str) -> int:
    key = text.upper()
    if key in names:
        return names[key]
    try:
        return int(text)
    except ValueError:
        raise errors.SpecError(path, f"{field} value {text!r} is not a number or name") from None


def _parse_field(text: str, index: int, path: str) -> tuple[frozenset[int], bool]:
    field, low, high, names = _FIELDS[index]
    values: set[int] = set()
    star = text in ("*", "?")
    for item in text.split(","):
        step = 1
        part = item
        if "/" in item:
            part, step_text = item.split("/", 1)
            step = _parse_value(step_text, {}, field, path)
            if step < 1:
                raise errors.SpecError(path, f"{field} step must be >= 1, got {step}")
        if part in ("*", "?"):
            a, b = low, high
        elif "-" in part:
            a_text, b_text = part.split("-", 1)
            a, b = _parse_value(a_text, names, field, path), _parse_value(b_text, names, field, path)
        else:
            a = _parse_value(part, names, field, path)
            b = high if step > 1 else a
        if not (low <= a <= high and low <= b <= high) or a > b:
            raise errors.SpecError(path, f"{field} {part!r} is outside {low}-{high}")
        values.update(range(a, b + 1, step))
    if index == 5 and 7 in values:  # 7 is Sunday too
        values.discard(7)
        values.add(0)
    return frozenset(values), star


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A parsed six-field cron expression (seconds first)."""

    text: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_star: bool
    weekdays_star: bool

    @classmethod
    def parse(cls, text: str, path: str = "cron") -> CronExpr:
        fields = text.split()
        if len(fields) != 6:
            raise errors.SpecError(
                path,
                f"cron expression {text!r} has {len(fields)} fields",
                "use six fields with seconds first: 'sec min hour day-of-month month day-of-week', "
                "e.g. '0 0 9 * * MON-FRI'",
            )
        parsed = [_parse_field(f, i, path) for i, f in enumerate(fields)]
        return cls(
            text,
            parsed[0][0],
            parsed[1][0],
            parsed[2][0],
            parsed[3][0],
            parsed[4][0],
            parsed[5][0],
            days_star=parsed[3][1],
            weekdays_star=parsed[5][1],
        )

    def _day_matches(self, d: datetime) -> bool:
        dom = d.day in self.days
        dow = (d.isoweekday() % 7) in self.weekdays
        if self.days_star or self.weekdays_star:
            return dom and dow
        return dom or dow

    def next_after(self, t: float, tz: tzinfo) -> float | None:
        """The first firing strictly after Unix time ``t`` (``None`` if none within 5 years)."""
        local = datetime.fromtimestamp(int(t) + 1, tz).replace(tzinfo=None, microsecond=0)
        limit = local + timedelta(days=366 * _SEARCH_YEARS)
        while local < limit:
            if local.month not in self.months:
                year, month = (local.year + 1, 1) if local.month == 12 else (local.year, local.month + 1)
                local = datetime(year, month, 1)
                continue
            if not self._day_matches(local):
                local = datetime(local.year, local.month, local.day) + timedelta(days=1)
                continue
            if local.hour not in self.hours:
                local = local.replace(minute=0, second=0) + timedelta(hours=1)
                continue
            if local.minute not in self.minutes:
                local = local.replace(second=0) + timedelta(minutes=1)
                continue
            if local.second not in self.seconds:
                local += timedelta(seconds=1)
                continue
            return local.replace(tzinfo=tz).timestamp()
        return None


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """One window: between ``start`` and ``end`` the bounds are ``[min, max]``."""

    start: CronExpr
    end: CronExpr
    min: int
    max: int

    def active(self, t: float, tz: tzinfo) -> bool:
        next_end = self.end.next_after(t, tz)
        next_start = self.start.next_after(t, tz)
        if next_end is None:
            return False
        return next_start is None or next_end < next_start


@dataclass(frozen=True, slots=True)
class CronSpec:
    """``scale.cron``: a timezone and schedules; the first active schedule wins."""

    schedules: tuple[CronSchedule, ...]
    timezone: tzinfo = UTC
    timezone_name: str = "UTC"

    def active_bounds(self, t: float) -> tuple[int, int, int] | None:
        """``(index, min, max)`` of the first active schedule at ``t``, or ``None``."""
        for i, schedule in enumerate(self.schedules):
            if schedule.active(t, self.timezone):
                return i, schedule.min, schedule.max
        return None
