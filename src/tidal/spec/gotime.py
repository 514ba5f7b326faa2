"""Go's ``time.Parse(layout, value)`` and the part of ``dateparse.ParseStrict`` Numaflow relies on.

Numaflow's ``eventTimeExtractor`` (``pkg/sources/transformer/builtin/event_time``) turns its
expression's text into a time with ``time.Parse(format, text)`` when ``format`` is given, else
with ``dateparse.ParseStrict(text)`` (araddon/dateparse), ``time.Local`` set to UTC. Both give
Tidal's event time: seconds since the epoch.

- :func:`parse_layout` is Go's ``time.Parse``, element for element (``2006``, ``06``, ``Jan``,
  ``January``, ``01``, ``1``, ``02``, ``2``, ``_2``, ``002``, ``15``, ``03``, ``3``, ``04``,
  ``4``, ``05``, ``5``, ``PM``, ``pm``, ``Mon``, ``Monday``, ``MST``, ``Z07:00`` and the other
  zone forms, ``.000``/``.999``; a fraction after the seconds the layout does not name is read
  too, as Go does). A zone abbreviation (``MST``) gives the wall clock as UTC, as Go's does
  when the abbreviation is not the local zone's (the local zone being UTC here).
- :func:`parse_any` is ``dateparse.ParseStrict`` for the forms Numaflow's tests and docs use:
  epoch seconds, milliseconds, microseconds and nanoseconds (10, 13, 16, 19 digits),
  ``yyyymmdd``, ``yyyyMMddhhmmss``, ``yyyy``, and ISO 8601 / RFC 3339 dates and date-times
  (``T`` or a space, fractions, ``Z`` or a numeric offset; no offset is UTC). A date starting
  ``dd/``, ``dd.`` or ``dd:`` is ambiguous (mm/dd or dd/mm) and refused, as ``ParseStrict``
  refuses it. **Tidal differs** for the rest of dateparse's forms (month names, RFC 1123, …):
  they fail, and the message keeps its event time (what Numaflow does when dateparse fails);
  give ``format`` for them.

A failure raises ``ValueError``. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["check_layout", "parse_any", "parse_layout"]

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
# Go's nextStdChunk: the elements a layout is cut into, longest first where one starts another.
_CHUNK = re.compile(
    r"January|Jan|Monday|Mon|MST|002|01|02|03|04|05|06|2006|_2006|__2|_2|15|1|2|3|4|5|PM|pm"
    r"|Z07:00:00|Z070000|Z07:00|Z0700|Z07|-07:00:00|-070000|-07:00|-0700|-07"
    r"|[.,](?:0+|9+)(?![0-9])"
)
_ELEMENTS = {"2006", "06", "01", "1", "Jan", "January", "02", "2", "_2", "002", "__2", "15", "03", "3"}


@dataclass
class _Fields:
    year: int = 0
    month: int = -1
    day: int = -1
    yday: int = -1
    hour: int = 0
    minute: int = 0
    second: int = 0
    nanos: int = 0
    pm: bool | None = None
    offset: int | None = None  # seconds east of UTC


def _chunks(layout: str) -> list[str]:
    """The layout cut into literals and elements (an element is a match of :data:`_CHUNK`)."""
    out, at = [], 0
    for m in _CHUNK.finditer(layout):
        out.append(layout[at : m.start()])
        text = m.group(0)
        if text == "_2006":  # Go: "_" then the year, not "_2" then "006"
            out[-1] += "_"
            text = "2006"
        out.append(text)
        at = m.end()
    out.append(layout[at:])
    return out


def check_layout(layout: str) -> None:
    """``ValueError`` when ``layout`` names no date or time element: a pattern from another
    language (``yyyy-MM-dd``), which Go would read as literal text and never match."""
    if not any(c in _ELEMENTS for c in _chunks(layout)[1::2]):
        raise ValueError(
            f"{layout!r} has no element of Go's reference time (Mon Jan 2 15:04:05 MST 2006): "
            "write the layout as Go's, e.g. 2006-01-02T15:04:05Z07:00"
        )


def _skip(value: str, literal: str) -> str:
    """Go's ``skip``: the literal text, a run of spaces in it matching any run of spaces."""
    while literal:
        if literal[0] == " ":
            if value and value[0] != " ":
                raise ValueError("the text does not match the layout")
            literal, value = literal.lstrip(" "), value.lstrip(" ")
            continue
        if not value or value[0] != literal[0]:
            raise ValueError("the text does not match the layout")
        literal, value = literal[1:], value[1:]
    return value


def _num(value: str, fixed: bool, width: int = 2) -> tuple[int, str]:
    """Go's ``getnum`` (``width`` 2) and ``getnum3``: up to ``width`` digits, all of them when fixed."""
    n = 0
    while n < width and n < len(value) and value[n].isascii() and value[n].isdigit():
        n += 1
    if n == 0 or (fixed and n != width):
        raise ValueError(f"expected a number at {value!r}")
    return int(value[:n]), value[n:]


def _lookup(names: list[str], value: str) -> tuple[int, str]:
    for i, name in enumerate(names):
        if value[: len(name)].lower() == name.lower():
            return i, value[len(name) :]
    raise ValueError(f"expected a name at {value!r}")


def _nanos(digits: str) -> int:
    if not digits.isdigit():
        raise ValueError("bad fraction")
    return int(digits[:9].ljust(9, "0"))


def _zone_abbreviation(value: str) -> int:
    """Go's ``parseTimeZone``: how long the abbreviation at the start of ``value`` is."""
    if value[:4] in ("ChST", "MeST"):
        return 4
    if value[:3] == "GMT":
        m = re.match(r"GMT[+-][0-9]{1,2}", value)
        return m.end() if m else 3
    upper = len(value) - len(value.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    if upper == 3 or (upper == 4 and (value[3] == "T" or value[:4] == "WITA")):
        return min(upper, 4)
    if upper == 5 and value[4] == "T":
        return 5
    raise ValueError(f"expected a time zone at {value!r}")


def _zone(element: str, value: str, f: _Fields) -> str:
    if element.startswith("Z") and value.startswith("Z"):
        f.offset = 0
        return value[1:]
    form = element.lstrip("Z").replace("-", "")  # 07:00:00, 070000, 07:00, 0700, 07
    size = 1 + len(form)
    part = value[:size]
    if (
        len(part) < size
        or part[0] not in "+-"
        or any(part[i] != ":" for i, c in enumerate(form, 1) if c == ":")
    ):
        raise ValueError(f"expected a zone offset at {value!r}")
    digits = part[1:].replace(":", "").ljust(6, "0")
    if not digits.isdigit():
        raise ValueError(f"expected a zone offset at {value!r}")
    hours, minutes, seconds = int(digits[:2]), int(digits[2:4]), int(digits[4:6])
    if hours > 24 or minutes > 60 or seconds > 60:
        raise ValueError("time zone offset out of range")
    f.offset = (hours * 3600 + minutes * 60 + seconds) * (1 if part[0] == "+" else -1)
    return value[size:]


def _element(element: str, value: str, f: _Fields, rest: list[str]) -> str:
    """One element of the layout read off ``value``; what remains of ``value``."""
    if element == "2006":
        if len(value) < 4 or not value[:4].isdigit():
            raise ValueError(f"expected a four-digit year at {value!r}")
        f.year, value = int(value[:4]), value[4:]
    elif element == "06":
        if len(value) < 2 or not value[:2].isdigit():
            raise ValueError(f"expected a two-digit year at {value!r}")
        year, value = int(value[:2]), value[2:]
        f.year = year + (1900 if year >= 69 else 2000)
    elif element in ("January", "Jan"):
        names = _MONTHS if element == "January" else [m[:3] for m in _MONTHS]
        month, value = _lookup(names, value)
        f.month = month + 1
    elif element in ("Monday", "Mon"):  # read and checked, not used: as Go
        _, value = _lookup(_DAYS if element == "Monday" else [d[:3] for d in _DAYS], value)
    elif element in ("01", "1"):
        f.month, value = _num(value, element == "01")
        if not 1 <= f.month <= 12:
            raise ValueError("month out of range")
    elif element in ("02", "2", "_2"):
        if element == "_2" and value.startswith(" "):
            value = value[1:]
        f.day, value = _num(value, element == "02")
    elif element in ("002", "__2"):
        if element == "__2" and value.startswith(" "):
            value = value[2:] if value.startswith("  ") else value[1:]
        f.yday, value = _num(value, element == "002", 3)
    elif element in ("15", "03", "3"):
        f.hour, value = _num(value, element == "03")
        if not 0 <= f.hour <= (23 if element == "15" else 12):
            raise ValueError("hour out of range")
    elif element in ("04", "4"):
        f.minute, value = _num(value, element == "04")
        if f.minute > 59:
            raise ValueError("minute out of range")
    elif element in ("05", "5"):
        f.second, value = _num(value, element == "05")
        if f.second > 59:
            raise ValueError("second out of range")
        following = next((c for c in rest[1::2]), "")
        fraction = re.match(r"[.,][0-9]+", value)
        if fraction and not (following[:1] in ".," and following[1:2] in ("0", "9")):
            f.nanos, value = _nanos(fraction.group(0)[1:]), value[fraction.end() :]
    elif element in ("PM", "pm"):
        word = value[:2]
        if word not in ((("PM", "AM")) if element == "PM" else ("pm", "am")):
            raise ValueError(f"expected {element} at {value!r}")
        f.pm, value = word.upper() == "PM", value[2:]
    elif element == "MST":
        if value.startswith("UTC"):
            return value[3:]
        value = value[_zone_abbreviation(value) :]  # the wall clock as UTC: Go's fabricated zone
    elif element.startswith(("Z0", "-0")):
        value = _zone(element, value, f)
    elif element[1] == "0":
        size = len(element)
        if len(value) < size or value[0] not in ".,":
            raise ValueError(f"expected a {size - 1}-digit fraction at {value!r}")
        f.nanos, value = _nanos(value[1:size]), value[size:]
    elif (m := re.match(r"[.,][0-9]+", value)) is not None:
        f.nanos, value = _nanos(m.group(0)[1:]), value[m.end() :]
    return value


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days(year: int, month: int) -> int:
    return 29 if month == 2 and _leap(year) else (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]


def _epoch_days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to the proleptic Gregorian date (any year, 0 included, as Go's)."""
    y = year - (month <= 2)
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _instant(f: _Fields) -> float:
    hour = f.hour + 12 if f.pm is True and f.hour < 12 else 0 if f.pm is False and f.hour == 12 else f.hour
    month, day = f.month, f.day
    if f.yday >= 0:
        yday = f.yday
        if not 1 <= yday <= (366 if _leap(f.year) else 365):
            raise ValueError("day-of-year out of range")
        m = 1
        while yday > _days(f.year, m):
            yday -= _days(f.year, m)
            m += 1
        if (month >= 0 and month != m) or (day >= 0 and day != yday):
            raise ValueError("day-of-year does not match the month and day")
        month, day = m, yday
    month, day = (1 if month < 0 else month), (1 if day < 0 else day)
    if not 1 <= day <= _days(f.year, month):
        raise ValueError("day out of range")
    seconds = _epoch_days(f.year, month, day) * 86400 + hour * 3600 + f.minute * 60 + f.second
    return seconds - (f.offset or 0) + f.nanos / 1e9


def parse_layout(layout: str, value: str) -> float:
    """Go's ``time.Parse(layout, value)`` in UTC, as seconds since the epoch."""
    chunks, f = _chunks(layout), _Fields()
    for i in range(0, len(chunks) - 1, 2):
        value = _skip(value, chunks[i])
        value = _element(chunks[i + 1], value, f, chunks[i + 2 :])
    value = _skip(value, chunks[-1])
    if value:
        raise ValueError(f"extra text {value!r} after the layout")
    return _instant(f)


_ISO = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.,]([0-9]+))?)?"
    r"(Z|[+-][0-9]{2}:?[0-9]{2})?)?"
)
_EPOCH = {19: 10**9, 16: 10**6, 13: 10**3, 10: 1}  # digits → units per second
_DIGIT_LAYOUTS = {14: "20060102150405", 8: "20060102", 4: "2006"}


def parse_any(text: str) -> float:
    """``dateparse.ParseStrict(text)`` for the forms in the module's docstring, in seconds."""
    if re.fullmatch(r"[0-9]+", text):
        if len(text) in _EPOCH:
            return int(text) / _EPOCH[len(text)]
        if len(text) in _DIGIT_LAYOUTS:
            return parse_layout(_DIGIT_LAYOUTS[len(text)], text)
        raise ValueError(f"{text!r}: {len(text)} digits is not an epoch time or a date")
    lead = re.match(r"[0-9]+([/.:])", text)
    if lead and lead.end() != 5:
        raise ValueError(f"{text!r}: this date has ambiguous mm/dd vs dd/mm type format")
    m = _ISO.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a date form Tidal reads without a format (give format)")
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    f = _Fields(year=int(year), month=int(month), day=int(day))
    if not 1 <= f.month <= 12:
        raise ValueError("month out of range")
    if hour is not None:
        f.hour, f.minute, f.second = int(hour), int(minute), int(second or 0)
        if f.hour > 23 or f.minute > 59 or f.second > 59:
            raise ValueError("time out of range")
    f.nanos = _nanos(fraction) if fraction else 0
    if zone and zone != "Z":
        _zone("-07:00" if ":" in zone else "-0700", zone, f)
    return _instant(f)
