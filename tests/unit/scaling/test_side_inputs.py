"""When side-input retrievers run and what their answers make of the value (tidal.scaling.side_inputs)."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tidal.errors import SpecError
from tidal.scaling.side_inputs import SideInputValue, Timetable, after_response, parse_schedule


def ts(*args: int, tz=UTC) -> float:
    return datetime(*args, tzinfo=tz).timestamp()


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        ("*/5 * * * * *", ts(2026, 1, 1, 0, 0, 2), ts(2026, 1, 1, 0, 0, 5)),  # the e2e's
        ("0 */2 * * * *", ts(2026, 1, 1, 0, 1, 0), ts(2026, 1, 1, 0, 2, 0)),  # simple_sideinput's
        ("0 */15 * * * *", ts(2026, 1, 1, 0, 15, 0), ts(2026, 1, 1, 0, 30, 0)),  # strictly after
        ("@hourly", ts(2026, 1, 1, 0, 10, 0), ts(2026, 1, 1, 1, 0, 0)),
        ("@daily", ts(2026, 1, 1, 10, 0, 0), ts(2026, 1, 2, 0, 0, 0)),
        ("@midnight", ts(2026, 1, 1, 10, 0, 0), ts(2026, 1, 2, 0, 0, 0)),
        ("@weekly", ts(2026, 1, 1, 10, 0, 0), ts(2026, 1, 4, 0, 0, 0)),  # a Sunday
        ("@monthly", ts(2026, 1, 15), ts(2026, 2, 1)),
        ("@yearly", ts(2026, 3, 1), ts(2027, 1, 1)),
        ("@every 5s", 100.0, 105.0),  # the previous run plus the duration
        ("@every 1h30m", 100.0, 100.0 + 5400),
        ("@every 1.5s", 100.0, 101.5),
    ],
)
def test_each_schedule_form_fires_when_numaflow_would(schedule, after, expected):
    assert parse_schedule(schedule).next_after(after, UTC) == expected


def test_a_cron_schedule_fires_in_its_timezone():
    la = ZoneInfo("America/Los_Angeles")
    # 09:00 every day in Los Angeles is 17:00 UTC in January (PST, UTC-8).
    assert parse_schedule("0 0 9 * * *").next_after(ts(2026, 1, 1, 12), la) == ts(2026, 1, 1, 17)


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        ("", "is empty"),
        ("0 9 * * *", "has 5 fields"),  # Numaflow's side-input schedule has seconds first
        ("@sometimes", "is not a descriptor"),
        ("@every", "needs a duration"),
        ("@every 5", "not a Go duration"),
        ("@every 5 seconds", "not a Go duration"),
        ("@every 100ms", "shorter than a second"),
        ("70 * * * * *", "outside 0-59"),
    ],
)
def test_a_schedule_tidal_cannot_read_names_the_field_and_the_forms(schedule, says):
    with pytest.raises(SpecError, match=says) as err:
        parse_schedule(schedule, "sideInputs[0].trigger.schedule")
    assert err.value.path == "sideInputs[0].trigger.schedule"


def test_no_broadcast_keeps_the_value_and_a_broadcast_makes_the_next_version():
    first = after_response(None, False, b"a", 10.0)
    assert first == SideInputValue(1, 10.0, b"a")
    assert after_response(first, True, b"", 20.0) is None  # no_broadcast_message(): keep it
    assert after_response(None, True, b"", 20.0) is None  # and before any value: still none
    assert after_response(first, False, b"a", 20.0) is None  # the same bytes: no change to see
    assert after_response(first, False, b"b", 30.0) == SideInputValue(2, 30.0, b"b")
    assert after_response(first, False, b"", 30.0) == SideInputValue(2, 30.0, b"")  # empty is a value


def test_the_first_run_is_at_once_then_each_runs_at_its_own_next_firing():
    table = Timetable({
        "fast": (parse_schedule("@every 5s"), UTC),
        "cron": (parse_schedule("*/10 * * * * *"), UTC),
    })  # fmt: skip
    t0 = ts(2026, 1, 1, 0, 0, 3)
    assert table.wait(t0) == 0.0
    assert table.due(t0) == ["fast", "cron"]  # Numaflow's manager runs the retriever when it starts
    assert table.ran("fast", t0) == t0 + 5
    assert table.ran("cron", t0) == ts(2026, 1, 1, 0, 0, 10)
    assert table.due(t0 + 1) == []
    assert table.wait(t0 + 1) == 4.0
    assert table.due(t0 + 5) == ["fast"]
    table.ran("fast", t0 + 5.2)  # a late run: @every counts from when it ran
    assert table.due(t0 + 7) == ["cron"]
    assert table.due(t0 + 10.2) == ["fast", "cron"]


def test_a_cron_that_never_fires_again_is_never_due():
    table = Timetable({"never": (parse_schedule("0 0 0 30 2 *"), UTC)})  # 30 February
    assert table.due(0.0) == ["never"]
    assert table.ran("never", 0.0) is None
    assert table.due(1e9) == []
    assert table.wait(1e9) is None
