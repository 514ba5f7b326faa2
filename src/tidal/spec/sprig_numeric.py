"""sprig's arithmetic (v3.2.3 ``functions.go``/``numeric.go``) with Go's values.

sprig converts every operand with spf13/cast (``cast.ToInt64``/``cast.ToFloat64``), which never
fails: what does not convert is ``0``. So ``sprig.add(json(payload).n, 1)`` is ``1`` for a
payload without ``n``, as in Numaflow; a filter written against it behaves the same in Tidal. The
integer functions are int64's: division truncates toward zero, ``mod`` takes the dividend's sign,
overflow wraps, and dividing by zero fails (Go panics; the filter drops the message). The ``f``
functions go through shopspring/decimal as sprig does, so ``addf(1.1, 2.2)`` is ``3.3``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

from tidal.spec.go_format import go_format

__all__ = ["NUMERIC", "to_float64", "to_int64"]

_INT_BASE0 = re.compile(r"[+-]?(0[xX](_?[0-9a-fA-F])+|0[bB](_?[01])+|0[oO]?(_?[0-7])+|[1-9](_?[0-9])*|0)")
_ZERO_DECIMAL = re.compile(r"^([+-]?[0-9]+)\.0*$")
_FLOAT = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE)


def _wrap(n: int) -> int:
    """``n`` as an int64 holds it: Go's arithmetic wraps around."""
    return (n + 2**63) % 2**64 - 2**63


def to_int64(v: Any) -> int:
    """``cast.ToInt64`` (v1.9): bools 1/0, floats truncated, strings by ``strconv.ParseInt(s, 0,
    64)`` after dropping a ``.0…`` tail (so ``"0x1F"`` is 31, ``"010"`` 8, ``"2.0"`` 2,
    ``"2.5"`` and ``"x"`` 0), anything else 0."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return _wrap(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return -(2**63)  # Go's int64(±Inf/NaN) on amd64
        return _wrap(int(v))
    if isinstance(v, bytes):
        v = v.decode(errors="replace")
    if isinstance(v, str):
        text = m.group(1) if (m := _ZERO_DECIMAL.match(v)) else v
        if _INT_BASE0.fullmatch(text):
            sign = -1 if text.startswith("-") else 1
            digits = text.lstrip("+-").replace("_", "")
            if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
                digits = "0o" + digits[1:]  # Go's base 0: a leading 0 is octal
            value = sign * int(digits, 0)
            return value if -(2**63) <= value < 2**63 else 0  # ParseInt's range error
        return 0
    return 0


def to_float64(v: Any) -> float:
    """``cast.ToFloat64``: numbers as floats, bools 1/0, strings by ``strconv.ParseFloat``,
    anything else (nil, a list, text that is no number) 0."""
    if isinstance(v, bool | int | float):
        return float(v)
    if isinstance(v, bytes):
        v = v.decode(errors="replace")
    if isinstance(v, str) and _FLOAT.fullmatch(v):
        return float(v)
    return 0.0


def _div(a: Any, b: Any) -> int:
    x, y = to_int64(a), to_int64(b)
    if y == 0:
        raise ZeroDivisionError("integer divide by zero")
    q = abs(x) // abs(y)
    return _wrap(q if (x < 0) == (y < 0) else -q)


def _mod(a: Any, b: Any) -> int:
    x, y = to_int64(a), to_int64(b)
    if y == 0:
        raise ZeroDivisionError("integer divide by zero")
    r = abs(x) % abs(y)
    return -r if x < 0 else r


def _mul(a: Any, *vs: Any) -> int:
    value = to_int64(a)
    for b in vs:
        value = _wrap(value * to_int64(b))
    return value


def _decimal(v: Any) -> Decimal:
    """``decimal.NewFromFloat(toFloat64(v))``: the shortest digits that read back."""
    f = to_float64(v)
    if math.isnan(f) or math.isinf(f):
        raise ValueError(f"cannot create a Decimal from {f}")  # shopspring panics
    return Decimal(repr(f))


def _decimal_op(op: Callable[[Decimal, Decimal], Decimal]) -> Callable[..., float]:
    def run(a: Any, *vs: Any) -> float:
        with localcontext() as ctx:
            ctx.prec = 200
            value = _decimal(a)
            for b in vs:
                value = op(value, _decimal(b))
            return float(value)

    return run


def _decimal_div(a: Decimal, b: Decimal) -> Decimal:
    """shopspring's ``Div``: rounded half away from zero to 16 decimal places."""
    if b == 0:
        raise ZeroDivisionError("decimal division by 0")
    return (a / b).quantize(Decimal("1e-16"), rounding=ROUND_HALF_UP)


def _round(a: Any, p: Any, *round_on: Any) -> float:
    """sprig's ``round``: to ``p`` places, up when the dropped part is at least ``round_on`` (.5)."""
    on = to_float64(round_on[0]) if round_on else 0.5
    val = to_float64(a)
    power = math.pow(10, to_float64(to_int64(p)))
    digit = power * val
    fraction = math.modf(digit)[0]
    rounded = math.ceil(digit) if fraction >= on else math.floor(digit)
    return rounded / power


def _integral(f: Callable[[float], int], x: float) -> float:
    """``math.Floor``/``math.Ceil``: NaN and the infinities come back as they went in."""
    return x if math.isnan(x) or math.isinf(x) else float(f(x))


def _extreme(pick: Callable[[list[float]], float], a: Any, vs: tuple[Any, ...]) -> float:
    """``math.Max``/``math.Min`` folded: any NaN makes the result NaN."""
    values = [to_float64(a), *(to_float64(v) for v in vs)]
    return math.nan if any(math.isnan(x) for x in values) else pick(values)


def _to_decimal(v: Any) -> int:
    """sprig's ``toDecimal``: ``strconv.ParseInt(fmt.Sprint(v), 8, 64)``, 0 where that fails
    (``"777"`` is 511)."""
    text = v if isinstance(v, str) else go_format(v)
    if not re.fullmatch(r"[+-]?[0-7]+", text):
        return 0
    value = int(text, 8)
    return value if -(2**63) <= value < 2**63 else 0


NUMERIC: dict[str, Callable[..., Any]] = {
    "add1": lambda i: _wrap(to_int64(i) + 1),
    "add": lambda *vs: _wrap(sum(to_int64(v) for v in vs)),
    "sub": lambda a, b: _wrap(to_int64(a) - to_int64(b)),
    "div": _div,
    "mod": _mod,
    "mul": _mul,
    "max": lambda a, *vs: max([to_int64(a), *(to_int64(v) for v in vs)]),
    "biggest": lambda a, *vs: max([to_int64(a), *(to_int64(v) for v in vs)]),
    "min": lambda a, *vs: min([to_int64(a), *(to_int64(v) for v in vs)]),
    "maxf": lambda a, *vs: _extreme(max, a, vs),
    "minf": lambda a, *vs: _extreme(min, a, vs),
    "floor": lambda a: _integral(math.floor, to_float64(a)),
    "ceil": lambda a: _integral(math.ceil, to_float64(a)),
    "round": _round,
    "add1f": lambda i: _decimal_op(lambda x, y: x + y)(i, 1),
    "addf": lambda *vs: _decimal_op(lambda x, y: x + y)(0.0, *vs),
    "subf": _decimal_op(lambda x, y: x - y),
    "mulf": _decimal_op(lambda x, y: x * y),
    "divf": _decimal_op(_decimal_div),
    "int": to_int64,  # sprig.int is cast.ToInt: an int64 on the 64-bit machines Numaflow runs on
    "int64": to_int64,
    "float64": to_float64,
    "toDecimal": _to_decimal,
}
