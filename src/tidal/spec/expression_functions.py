"""The functions of Numaflow's expression language: its conversions and the sprig functions.

Numaflow's ``pkg/shared/expr/eval_bool.go`` (``getFuncMap``, before 1.6 removed the builtins)
gives an expression ``json``, ``int`` and ``string`` and sprig's ``GenericFuncMap`` as
``sprig.<name>`` (Masterminds/sprig v3.2.3). Values are Go's: a JSON number is a ``float64``
(``_json`` reads every number as a float, so ``string(json(payload).id)`` is ``"99"`` and a
large one ``"1.673239888123e+12"``, as Go prints them), and what a string-valued expression
gives is Go's ``fmt.Sprintf("%v", result)`` (:func:`go_format`).

Where Tidal differs on purpose:

- ``object(x)`` is ``json(x)``. Numaflow's builtin-functions README writes
  ``int(object(payload).id) > 100`` but its function map never defined ``object``, so there
  that filter fails on every message and drops it; Tidal runs it as the README means.
- ``float`` and ``len`` are Tidal's own (``len`` is also expr's builtin).
- sprig's functions that depend on the clock, randomness or the process's environment
  (``now``, ``date``, ``rand*``, ``uuidv4``, ``shuffle``, ``env``, ``expandenv``, …) are refused:
  a replayed message would be judged differently. Sprig functions not listed in :data:`SPRIG`
  are refused when the spec is read, naming the function.
- Arithmetic (:mod:`tidal.spec.sprig_numeric`) and the regex functions on Go's RE2 syntax
  (:mod:`tidal.spec.go_regexp`, whose refusals come when the spec is read) have modules of
  their own.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import zlib
from collections.abc import Callable
from typing import Any

from tidal.spec.go_format import go_format, go_quote
from tidal.spec.go_regexp import REGEXP
from tidal.spec.sprig_numeric import NUMERIC

__all__ = ["FUNCTIONS", "SPRIG", "go_format", "to_int", "to_string"]

_ATOI = re.compile(r"[+-]?[0-9]+")


def to_string(v: Any) -> str:
    """Numaflow's ``string``: ``""`` for nil, else ``%v``."""
    return "" if v is None else go_format(v)


def to_int(v: Any) -> int:
    """Numaflow's ``int``: a float truncated, a string by ``strconv.Atoi`` ("1" yes; "", "1.5",
    " 1" no), anything else refused."""
    if isinstance(v, bool):
        raise TypeError("cannot convert a bool to int")
    if isinstance(v, float):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str | bytes):
        text = v.decode(errors="replace") if isinstance(v, bytes) else v
        if _ATOI.fullmatch(text):
            return int(text)
    raise ValueError(f"cannot convert {v!r} to int")


def _json(v: Any) -> Any:
    """Numaflow's ``json``: nil for nil, else the text as a JSON object (numbers as float64)."""
    if v is None:
        return None
    if not isinstance(v, str | bytes):
        raise TypeError("unknown type")
    value = json.loads(v, parse_int=float)
    if not isinstance(value, dict):
        raise TypeError(f"cannot convert {v!r} to object")
    return value


def _float(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else float(to_string(v))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "json": _json,
    "object": _json,  # the README's name for json (see the module's docstring)
    "int": to_int,
    "string": to_string,
    "float": _float,
    "len": lambda v: len(v) if not isinstance(v, str | bytes) else len(to_string(v).encode()),
}


# -- sprig (v3.2.3's functions.go and strings.go), its argument order: the subject last -----------


def _s(v: Any) -> str:
    """An argument sprig declares ``string``: Go's expr would refuse another type; Tidal passes
    Go's ``%v`` of it (nil as ``""``)."""
    return to_string(v)


def _strval(v: Any) -> str:
    return v if isinstance(v, str) else go_format(v)


def _bytes_slice(s: str, start: int, end: int | None) -> str:
    """``s[start:end]`` over UTF-8 bytes, failing where Go's slice would panic."""
    raw = s.encode()
    stop = len(raw) if end is None else end
    if not 0 <= start <= stop <= len(raw):
        raise IndexError(f"slice bounds out of range [{start}:{stop}] with length {len(raw)}")
    return raw[start:stop].decode(errors="replace")


def _substr(start: Any, end: Any, s: Any) -> str:
    start, end, text = to_int(start), to_int(end), _s(s)
    if start < 0:
        return _bytes_slice(text, 0, end)
    if end < 0 or end > len(text.encode()):
        return _bytes_slice(text, start, None)
    return _bytes_slice(text, start, end)


def _trunc(c: Any, s: Any) -> str:
    n, text = to_int(c), _s(s)
    size = len(text.encode())
    if n < 0 and size + n > 0:
        return _bytes_slice(text, size + n, None)
    if n >= 0 and size > n:
        return _bytes_slice(text, 0, n)
    return text


def _go_space(c: str) -> bool:
    return c.isspace() and c not in "\x1c\x1d\x1e\x1f"  # unicode.IsSpace: Python counts these too


def _title(s: Any) -> str:
    """Go's ``strings.Title``: each letter after a separator (not a letter, digit or ``_``) upper."""
    out, previous = [], " "
    for c in _s(s):
        separator = not (previous.isalnum() or previous == "_")
        out.append(c.upper() if separator else c)
        previous = c
    return "".join(out)


def _b64dec(s: Any) -> str:
    """sprig's ``b64dec``: the decoded text, or Go's error text when it is not base64 (sprig
    returns the error as the value)."""
    text = _s(s).replace("\r", "").replace("\n", "")  # Go's decoder skips newlines
    try:
        return base64.b64decode(text, validate=True).decode(errors="replace")
    except (binascii.Error, ValueError):
        bad = next((i for i, c in enumerate(text) if c not in _B64), len(text))
        return f"illegal base64 data at input byte {bad}"


_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _b32dec(s: Any) -> str:
    try:
        return base64.b32decode(_s(s)).decode(errors="replace")
    except (binascii.Error, ValueError):
        return "illegal base32 data at input byte 0"


def _empty(v: Any) -> bool:
    """sprig's ``empty``: nil, false, 0, and an empty string, list or map."""
    if v is None or v is False:
        return True
    if isinstance(v, int | float):
        return v == 0
    return isinstance(v, str | bytes | list | dict) and len(v) == 0


def _split_list(sep: Any, s: Any) -> list[str]:
    separator, text = _s(sep), _s(s)
    return list(text) if separator == "" else text.split(separator)


def _join(sep: Any, v: Any) -> str:
    if v is None:
        return ""
    items = v if isinstance(v, list) else [v]
    return _s(sep).join(_strval(x) for x in items if x is not None)


SPRIG: dict[str, Callable[..., Any]] = {
    "contains": lambda sub, s: _s(sub) in _s(s),
    "hasPrefix": lambda p, s: _s(s).startswith(_s(p)),
    "hasSuffix": lambda p, s: _s(s).endswith(_s(p)),
    "b64dec": _b64dec,
    "b64enc": lambda s: base64.b64encode(_s(s).encode()).decode(),
    "b32dec": _b32dec,
    "b32enc": lambda s: base64.b32encode(_s(s).encode()).decode(),
    "trim": lambda s: _s(s).strip(),  # strings.TrimSpace
    "trimAll": lambda cut, s: _s(s).strip(_s(cut)),
    "trimall": lambda cut, s: _s(s).strip(_s(cut)),  # sprig's deprecated spelling
    "trimPrefix": lambda p, s: _s(s).removeprefix(_s(p)),
    "trimSuffix": lambda p, s: _s(s).removesuffix(_s(p)),
    "upper": lambda s: _s(s).upper(),
    "lower": lambda s: _s(s).lower(),
    "title": _title,
    "replace": lambda old, new, s: _s(s).replace(_s(old), _s(new)),
    "repeat": lambda n, s: _s(s) * max(to_int(n), 0),
    "substr": _substr,
    "trunc": _trunc,
    "nospace": lambda s: "".join(c for c in _s(s) if not _go_space(c)),
    "quote": lambda *vs: " ".join(go_quote(_strval(v)) for v in vs if v is not None),
    "squote": lambda *vs: " ".join(f"'{go_format(v)}'" for v in vs if v is not None),
    "toString": _strval,
    "atoi": lambda s: int(_s(s)) if _ATOI.fullmatch(_s(s)) else 0,
    "splitList": _split_list,
    "join": _join,
    "sha1sum": lambda s: hashlib.sha1(_s(s).encode()).hexdigest(),
    "sha256sum": lambda s: hashlib.sha256(_s(s).encode()).hexdigest(),
    "adler32sum": lambda s: str(zlib.adler32(_s(s).encode())),
    "default": lambda d, *given: d if not given or _empty(given[0]) else given[0],
    "empty": _empty,
    "coalesce": lambda *vs: next((v for v in vs if not _empty(v)), None),
    "ternary": lambda yes, no, test: yes if test is True else no,
    **NUMERIC,
    **REGEXP,
}
