"""Durations as Numaflow, Knative and Kubernetes write them: Go's ``time.ParseDuration``.

Every duration a Tidal spec or a converted manifest holds is read here: Numaflow's windows,
``allowedLateness``, ``watermark.maxDelay``, a generator's ``duration``, ``rateLimit`` and
``retryStrategy`` periods; Knative's windows and deadlines; a side input's ``@every``. All of
them are Go durations where they come from (``metav1.Duration``, ``time.ParseDuration``), so
``1m30s`` is as valid as ``90s``. In Tidal's own YAML a bare number is seconds as well (Go would
ask for a unit).

- :func:`go_duration`: Go's parser, element for element (``ns``, ``us``/``µs``, ``ms``, ``s``,
  ``m``, ``h``, fractions, a sign, ``0``); ``ValueError`` otherwise.
- :func:`seconds`: a number, or a Go duration; ``ValueError`` naming the forms otherwise (for
  pydantic validators, which put the field's path in front).
- :func:`spec_seconds`: the same for a converter that knows the field's path: a
  :class:`~tidal.errors.SpecError` naming it, and ``positive`` refuses 0 and less.

Pure: text in, seconds out. It sits in ``scaling``, the layer under ``spec``, because Knative's
config (:mod:`tidal.scaling.kpa_spec`) and the side inputs' schedules
(:mod:`tidal.scaling.side_inputs`) read durations there too.
"""

from __future__ import annotations

import re

from tidal import errors

__all__ = ["FORMS", "go_duration", "seconds", "spec_seconds"]

FORMS = "write a Go duration (60s, 500ms, 2m, 1m30s) or a number of seconds"

_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_BARE_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")


def go_duration(text: str) -> float:
    """Seconds in a Go duration (``time.ParseDuration``): ``1m30s``, ``500ms``, ``1h``, ``1.5h``,
    ``-2s``, ``0``. Raises ``ValueError`` otherwise (``3``: Go asks for a unit)."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    total, at = 0.0, 0
    for part in _GO_PART.finditer(body):
        if part.start() != at:
            break
        total += float(part.group(1)) * _GO_UNITS[part.group(2)]
        at = part.end()
    if at != len(body):
        raise ValueError(f"invalid duration {text!r}")
    return sign * total


def seconds(value: object) -> float:
    """A number of seconds (also as text), or a Go duration, in seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration: {FORMS}")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        return float(text) if _BARE_NUMBER.fullmatch(text) else go_duration(text)
    except ValueError:
        raise ValueError(f"{value!r} is not a duration: {FORMS}") from None


def spec_seconds(value: object, at: str, *, positive: bool = False) -> float:
    """:func:`seconds` for the field at ``at``: a :class:`~tidal.errors.SpecError` that names it,
    and, when ``positive``, one for 0 or less too."""
    kind = "a positive duration" if positive else "a duration"
    try:
        out = seconds(value)
    except ValueError:
        raise errors.SpecError(at, f"{value!r} is not {kind}", FORMS) from None
    if positive and out <= 0:
        raise errors.SpecError(at, f"{value!r} is not {kind}", FORMS)
    return out
