"""Numaflow's builtin source transformers, as its own tests use them (before 1.6:
pkg/sources/transformer/builtin/event_time/event_time_extractor_test.go,
time_extraction_filter/time_extraction_filter_test.go), and the Go time parsing they rest on."""

from __future__ import annotations

import pickle
import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal import errors
from tidal.contracts import DROP
from tidal.spark.query.udf import Transform
from tidal.spec import parse_pipeline
from tidal.spec.builtins import BuiltinSpec, EventTimeExtractor, TimeExtractionFilter
from tidal.spec.gotime import parse_any, parse_layout
from tidal.spec.model import UdfSpec

RFC3339 = "2006-01-02T15:04:05Z07:00"  # Go's time.RFC3339
ANSIC = "Mon Jan _2 15:04:05 2006"  # Go's time.ANSIC
MSG = (
    b'{"test": 21, "item": [{"id": 1, "name": "numa", "time": "2022-02-18T21:54:42.123Z"},'
    b'{"id": 2, "name": "numa", "time": "2021-02-18T21:54:42.123Z"}]}'
)
EXTRACTED = datetime(2021, 2, 18, 21, 54, 42, 123000, UTC).timestamp()


def _epoch_msg(time: str) -> bytes:
    return b'{"test": 21, "item": [{"id": 1, "time": "%s"},{"id": 2, "time": "%s"}]}' % (
        time.encode(),
        time.encode(),
    )


# -- eventTimeExtractor: event_time_extractor_test.go ------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "payload", "event_time"),
    [
        ({"expression": "json(payload).item[1].time"}, MSG, EXTRACTED),  # format not specified
        ({"expression": "json(payload).item[1].time", "format": RFC3339}, MSG, EXTRACTED),
        ({"expression": "json(payload).item[1].time", "format": ANSIC}, MSG, None),  # not matching: kept
        ({"expression": "json(payload).item[1].time"}, _epoch_msg("1673239888"), 1673239888.0),
        ({"expression": "json(payload).item[1].time"}, _epoch_msg("1673239888123"), 1673239888.123),
        ({"expression": "json(payload).item[1].time"}, _epoch_msg("04/08/2014 22:05"), None),  # ambiguous
        ({"expression": "json(payload).item[1].time"}, b"not json", None),  # fails: kept
        ({"expression": "object(payload).at", "format": "2006-01-02"}, b'{"at": "2024-03-01"}', 1709251200.0),
    ],
)
def test_numaflows_event_time_extractor_cases(kwargs, payload, event_time):
    out = BuiltinSpec(name="eventTimeExtractor", kwargs=kwargs).function()(payload)
    assert out.value == payload  # the payload is unchanged
    assert out.keys is None  # the keys are the input's
    assert out.event_time == pytest.approx(event_time) if event_time is not None else out.event_time is None


def test_a_json_number_is_read_as_go_prints_a_float64():
    """EvalStr is Go's %v: a JSON number 1673239888 prints as 1.673239888e+09, which dateparse
    refuses (the event time is kept); int() of it gives the digits, which it reads."""
    extract = EventTimeExtractor("json(payload).t")
    assert extract(b'{"t": 1673239888}').event_time is None
    assert EventTimeExtractor("int(json(payload).t)")(b'{"t": 1673239888}').event_time == 1673239888.0


def test_a_missing_expression_or_a_field_that_cannot_compile_is_refused_when_the_spec_is_read():
    """Numaflow's "Missing expression" case; its "Cannot compile json expression" case
    (``.non-exist-field-name``) runs in Numaflow and keeps every event time: Tidal refuses it."""
    with pytest.raises(ValueError, match=re.escape('needs kwargs.expression, e.g. "int')):
        BuiltinSpec(name="eventTimeExtractor", kwargs={})
    with pytest.raises(ValueError, match=r"kwargs\.expression: '(exist|x)' is not known"):
        BuiltinSpec(name="eventTimeExtractor", kwargs={"expression": "json(payload).item[1].non-exist-x"})
    with pytest.raises(ValueError, match=r"kwargs\.format: 'yyyy-MM-dd' has no element of Go's"):
        BuiltinSpec(name="eventTimeExtractor", kwargs={"expression": "payload", "format": "yyyy-MM-dd"})
    with pytest.raises(ValueError, match=r"kwargs\.eventTimeFormat: the eventTimeExtractor builtin does not"):
        BuiltinSpec(name="eventTimeExtractor", kwargs={"expression": "payload", "eventTimeFormat": RFC3339})


# -- timeExtractionFilter: time_extraction_filter_test.go ------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({}, "needs kwargs.filterExpr"),  # "Missing both expressions"
        ({"filterExpr": "true"}, "needs kwargs.eventTimeExpr"),
        ({"eventTimeExpr": "payload"}, "needs kwargs.filterExpr"),
    ],
)
def test_time_extraction_filter_needs_both_expressions(kwargs, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        BuiltinSpec(name="timeExtractionFilter", kwargs=kwargs)


def test_numaflows_time_extraction_filter_cases():
    at = "json(payload).item[1].time"
    kept = TimeExtractionFilter("int(json(payload).item[1].id) == 2", at, RFC3339)
    assert (kept(MSG).value, kept(MSG).event_time, kept(MSG).tags) == (MSG, pytest.approx(EXTRACTED), ())
    dropped = TimeExtractionFilter(
        "int(json(payload).item[1].id) == 3", "json(payload).item[1].time", RFC3339
    )
    assert dropped(MSG).tags == (DROP,)
    assert TimeExtractionFilter("int(json(payload).id) < 1", "payload")(b"not json").tags == (DROP,)  # fails
    wrong = TimeExtractionFilter("int(json(payload).item[1].id) == 2", "json(payload).item[1].time", ANSIC)
    assert (wrong(MSG).value, wrong(MSG).event_time, wrong(MSG).tags) == (MSG, None, ())  # event time kept


def test_the_builtins_pickle_as_their_texts():
    for fn in (
        EventTimeExtractor("json(payload).t", RFC3339),
        TimeExtractionFilter("true", "json(payload).t", ""),
    ):
        again = pickle.loads(pickle.dumps(fn))
        assert again(b'{"t": "2021-02-18T21:54:42.123Z"}') == fn(b'{"t": "2021-02-18T21:54:42.123Z"}')


def test_transform_keeps_the_input_time_where_extraction_fails_and_drops_what_the_filter_drops():
    """What the writer sees: each output's source time, the input's where none was extracted."""
    msgs = [b'{"id": 1, "t": "2021-01-18T21:54:42.123Z"}', b'{"id": 2, "t": "garbage"}', b'{"id": 500}']
    udf = UdfSpec(
        builtin={"name": "timeExtractionFilter", "kwargs": {"filterExpr": "int(json(payload).id) < 100",
                                                            "eventTimeExpr": "json(payload).t"}}
    )  # fmt: skip
    out = Transform("in-transformer", udf, dead_letter=False).apply(["a", "b", "c"], msgs)
    assert out.ids.to_pylist() == ["a", "b"]
    assert out.payloads.to_pylist() == msgs[:2]
    assert out.dropped == 1
    inputs_times = [5.0, 6.0, 7.0]
    import pyarrow as pa

    times = out.times(pa.array(inputs_times, pa.float64())).to_pylist()
    assert times == [pytest.approx(datetime(2021, 1, 18, 21, 54, 42, 123000, UTC).timestamp()), 6.0]


def test_a_bad_transformer_builtin_names_the_field_in_a_pipeline():
    bad = {
        "name": "p",
        "vertices": [
            {"name": "in", "source": {"generator": {}}},
            {
                "name": "t",
                "udf": {"builtin": {"name": "eventTimeExtractor", "kwargs": {"expression": "x()"}}},
            },
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "in", "to": "t"}, {"from": "t", "to": "out"}],
    }
    with pytest.raises(errors.SpecError, match=r"vertices\[1\]\.udf\.builtin.*kwargs\.expression: x\(\)"):
        parse_pipeline(bad)


# -- Go's time.Parse and dateparse ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "value", "expected"),
    [
        (RFC3339, "2021-02-18T21:54:42.123Z", datetime(2021, 2, 18, 21, 54, 42, 123000, UTC)),
        (RFC3339, "2021-02-18T21:54:42+01:00", datetime(2021, 2, 18, 20, 54, 42, tzinfo=UTC)),
        (ANSIC, "Thu Feb  4 21:54:42 2021", datetime(2021, 2, 4, 21, 54, 42, tzinfo=UTC)),
        ("02 Jan 06 15:04 MST", "04 Feb 21 21:54 PST", datetime(2021, 2, 4, 21, 54, tzinfo=UTC)),  # RFC822
        (
            "Monday, 02-Jan-06 15:04:05 -0700",
            "Friday, 05-Mar-99 01:02:03 -0130",
            datetime(1999, 3, 5, 2, 32, 3, tzinfo=UTC),
        ),
        ("3:04PM January 2, 2006", "9:15AM March 7, 2020", datetime(2020, 3, 7, 9, 15, tzinfo=UTC)),
        ("2006-01-02 15:04:05.000", "2020-03-07 12:00:00.250", datetime(2020, 3, 7, 12, 0, 0, 250000, UTC)),
        ("2006-002", "2020-060", datetime(2020, 2, 29, tzinfo=UTC)),  # day of the year
        ("20060102150405", "20180722105203", datetime(2018, 7, 22, 10, 52, 3, tzinfo=UTC)),
    ],
)
def test_go_layouts(layout, value, expected):
    assert parse_layout(layout, value) == pytest.approx(expected.timestamp())


@pytest.mark.parametrize(
    ("layout", "value"),
    [
        (ANSIC, "2021-02-18T21:54:42.123Z"),
        (RFC3339, "2021-02-30T21:54:42Z"),  # day out of range
        (RFC3339, "2021-02-18T21:54:42"),  # no zone
        ("2006-01-02", "2021-02-18 extra"),
        ("15:04", "24:00"),
    ],
)
def test_go_layouts_refuse_what_go_refuses(layout, value):
    with pytest.raises(ValueError):
        parse_layout(layout, value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1499979655583057426", 1499979655.583057426),
        ("1499979795437000", 1499979795.437),
        ("20180722105203", datetime(2018, 7, 22, 10, 52, 3, tzinfo=UTC).timestamp()),
        ("20140601", datetime(2014, 6, 1, tzinfo=UTC).timestamp()),
        ("2014", datetime(2014, 1, 1, tzinfo=UTC).timestamp()),
        ("2013-04-01 22:43:22", datetime(2013, 4, 1, 22, 43, 22, tzinfo=UTC).timestamp()),
        ("2009-08-12T22:15:09-07:00", datetime(2009, 8, 13, 5, 15, 9, tzinfo=UTC).timestamp()),
        ("2020-08-17T17:00:00+0100", datetime(2020, 8, 17, 16, 0, tzinfo=UTC).timestamp()),
        ("2006-01-02", datetime(2006, 1, 2, tzinfo=UTC).timestamp()),
    ],
)
def test_dateparse_forms(text, expected):
    assert parse_any(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["3.31.2014", "8/8/71", "04/08/2014 22:05", "123", "12345", "Feb 3 2013"])
def test_dateparse_strict_refuses_the_ambiguous_and_tidal_the_forms_it_does_not_read(text):
    with pytest.raises(ValueError):
        parse_any(text)


@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)))
def test_an_rfc3339_time_reads_back_the_same_instant_both_ways(moment):
    offset = timedelta(hours=5, minutes=30)
    text = moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    local = (moment + offset).replace(tzinfo=None).isoformat(timespec="milliseconds") + "+05:30"
    truncated = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    assert parse_layout(RFC3339, text) == pytest.approx(moment.timestamp(), abs=1e-6)
    assert parse_any(text) == pytest.approx(moment.timestamp(), abs=1e-6)
    assert parse_layout(RFC3339, local) == pytest.approx(truncated.timestamp(), abs=1e-6)
    seconds = str(int(moment.timestamp()))
    if len(seconds) == 10:  # dateparse reads 10 digits as epoch seconds (9 digits: not a form it has)
        assert parse_any(seconds) == int(seconds)
    if len(seconds + "000") == 13:
        assert parse_any(seconds + "123") == pytest.approx(int(seconds) + 0.123)
