"""When a side input's retriever runs, and what its answer makes of the value (Numaflow's manager).

Numaflow's side-input manager (``rust/numaflow-sideinput/src/manager.rs``) calls the retriever
once when it starts, then at every firing of its trigger's ``schedule`` in its ``timezone``; an
answer with ``no_broadcast`` keeps the value the vertices have, any other answer replaces it.
A failed call is not retried: the next firing tries again. This module is that rule with time as
an argument; the thread that calls the retriever and the store that keeps the value are the
runtime's (:mod:`tidal.spark.run.side_inputs`).

A schedule is one of (Numaflow's ``SideInputTrigger.schedule``):

- a six-field cron expression, seconds first (``*/5 * * * * *``), read by
  :class:`~tidal.scaling.cron.CronExpr` as ``scale.cron`` reads its windows;
- a descriptor: ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily``
  (``@midnight``), ``@hourly``;
- ``@every <duration>`` with a Go duration (``@every 5s``, ``@every 1h30m``): the previous run
  plus the duration, as robfig/cron's constant-delay schedule does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo

from tidal import errors
from tidal.scaling.cron import CronExpr
from tidal.scaling.durations import go_duration

__all__ = ["Schedule", "SideInputValue", "Timetable", "after_response", "parse_schedule"]

_DESCRIPTORS = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}
_FIX = (
    "use six cron fields with seconds first ('*/5 * * * * *'), a descriptor (@hourly, @daily, …) "
    "or @every with a Go duration ('@every 30s')"
)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed trigger schedule: a cron expression, or a constant delay (``every`` seconds)."""

    text: str
    cron: CronExpr | None = None
    every: float | None = None

    def next_after(self, t: float, tz: tzinfo) -> float | None:
        """The first firing strictly after ``t`` (the previous run, for ``@every``)."""
        if self.every is not None:
            return t + self.every
        assert self.cron is not None
        return self.cron.next_after(t, tz)


def _go_duration(text: str, path: str) -> float:
    """``@every``'s duration: Go's ``time.ParseDuration``, as robfig/cron reads it."""
    try:
        return go_duration(text)
    except ValueError:
        raise errors.SpecError(
            path, f"{text!r} is not a Go duration", "write it as 30s, 5m or 1h30m"
        ) from None


def parse_schedule(text: str, path: str = "trigger.schedule") -> Schedule:
    """``text`` as a :class:`Schedule`; a :class:`~tidal.errors.SpecError` naming ``path`` and
    the forms Tidal reads when it is none of them."""
    text = text.strip()
    if not text:
        raise errors.SpecError(path, "is empty", _FIX)
    if text.startswith("@every"):
        duration = text[len("@every") :].strip()
        if not duration:
            raise errors.SpecError(path, "@every needs a duration", "write it as '@every 30s'")
        seconds = _go_duration(duration, path)
        if seconds < 1:
            raise errors.SpecError(
                path, f"{text!r} is shorter than a second", "use @every 1s or more (robfig/cron's least)"
            )
        return Schedule(text, every=seconds)
    if text.startswith("@"):
        if text not in _DESCRIPTORS:
            raise errors.SpecError(path, f"{text!r} is not a descriptor", _FIX)
        return Schedule(text, cron=CronExpr.parse(_DESCRIPTORS[text], path))
    if len(text.split()) != 6:
        raise errors.SpecError(path, f"{text!r} has {len(text.split())} fields", _FIX)
    return Schedule(text, cron=CronExpr.parse(text, path))


@dataclass(frozen=True, slots=True)
class SideInputValue:
    """A side input's value as the vertices see it: its bytes, its version (1 for the first
    value, one more for each new one) and when the retriever gave it."""

    version: int
    at: float
    value: bytes


def after_response(
    current: SideInputValue | None, no_broadcast: bool, value: bytes, now: float
) -> SideInputValue | None:
    """The new value a retriever's answer makes, or None when the vertices keep theirs: a
    ``no_broadcast`` answer keeps it (Numaflow writes nothing to its store then), and so does a
    broadcast of the very bytes they have (Numaflow's synchroniser skips writing an unchanged
    file, so a vertex sees no change)."""
    if no_broadcast:
        return None
    if current is not None and current.value == value:
        return None
    return SideInputValue((current.version if current is not None else 0) + 1, now, bytes(value))


@dataclass
class Timetable:
    """When each side input's retriever runs next: at once the first time (Numaflow's manager
    runs it when it starts), then at its schedule's next firing after the run that just ended."""

    schedules: dict[str, tuple[Schedule, tzinfo]]
    due_at: dict[str, float | None] = field(default_factory=dict)

    def due(self, now: float) -> list[str]:
        """The side inputs whose retriever should run at ``now``, in the spec's order."""
        return [n for n in self.schedules if n not in self.due_at or _reached(self.due_at[n], now)]

    def ran(self, name: str, now: float) -> float | None:
        """``name``'s retriever ran (or failed) at ``now``: when it runs next (None: never again,
        a cron expression with no firing within five years)."""
        schedule, tz = self.schedules[name]
        self.due_at[name] = schedule.next_after(now, tz)
        return self.due_at[name]

    def wait(self, now: float) -> float | None:
        """Seconds until the next retriever is due (0 when one is), None when none ever is."""
        if len(self.due_at) < len(self.schedules):
            return 0.0
        times = [t for t in self.due_at.values() if t is not None]
        return max(0.0, min(times) - now) if times else None


def _reached(at: float | None, now: float) -> bool:
    return at is not None and now >= at
