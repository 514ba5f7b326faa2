"""Go's ``fmt.Sprintf("%v", v)`` of an expression's value, and Go's ``%q`` of a string.

Numaflow's expressions give Go values and its ``EvalStr``, ``string(x)`` and sprig's ``strval``
print them with ``%v``; Tidal's values are Python's, so a ``2.0`` must print ``2`` and a list
``[a b]`` for a filter or an event time to read what Numaflow read. Its own module because the
conversions and sprig's functions (two modules) both print values.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

__all__ = ["go_format", "go_quote"]


def _go_float(f: float) -> str:
    """Go's ``%v`` of a ``float64``: ``strconv.FormatFloat(f, 'g', -1, 64)``, the shortest
    digits that read back, in exponent form when the exponent is below -4 or at least 6
    (``%g`` with the shortest precision decides at precision 6: ``1e+06``, ``123456``)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, digits, exponent = Decimal(repr(f)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(str(d) for d in digits)
    point = len(text) + exponent  # where the decimal point goes in the digits
    exp = point - 1
    minus = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{minus}{text}{'0' * (point - len(text))}"
    return f"{minus}{text[:point]}.{text[point:]}"


def go_format(v: Any) -> str:
    """Go's ``fmt.Sprintf("%v", v)`` for the values an expression yields (what Numaflow's
    ``EvalStr`` returns): ``<nil>``, ``true``, numbers as Go prints them, ``[a b]``, ``map[k:v]``."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, list):
        return "[" + " ".join(go_format(x) for x in v) + "]"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_format(v[k])}" for k in sorted(v)) + "]"
    return str(v)


def go_quote(s: str) -> str:
    """Go's ``strconv.Quote`` (``%q`` of a string): double quotes, ``\\"`` and ``\\\\``, the C
    escapes, ``\\xNN`` for other control bytes, ``\\uNNNN``/``\\UNNNNNNNN`` for what does not print."""
    out = ['"']
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif c == " " or (c.isprintable() and not c.isspace()):
            out.append(c)
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    out.append('"')
    return "".join(out)


_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
