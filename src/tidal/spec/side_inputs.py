"""``sideInputs:`` — Numaflow's side inputs: a retriever run on a schedule, its value broadcast to
the vertices that name it.

At the pipeline's level, each side input names its retriever (a pynumaflow ``SideInput`` class or
instance, or a function returning a ``Response``, as ``module:name``) and its trigger::

    sideInputs:
      - name: myticker
        pynumaflow: myretrievers:ExampleSideInput
        trigger: {schedule: "*/5 * * * * *", timezone: America/Los_Angeles}

A vertex lists the side inputs its handler reads (``sideInputs: [myticker]``); only a pynumaflow
map handler, a reduce vertex's handler or a pynumaflow sink can (they read files, as Numaflow's
UDFs do). The cross-field
checks, each naming the field and the fix, are :mod:`tidal.spec.side_input_checks`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from tidal import errors
from tidal.scaling.side_inputs import Schedule, parse_schedule
from tidal.spec.base import Model

__all__ = ["SideInputSpec", "SideInputTrigger", "trigger_of"]

NAME = r"^[a-zA-Z0-9]([a-zA-Z0-9._-]{0,252}[a-zA-Z0-9])?$"  # a file name under the side-input directory


class SideInputTrigger(Model):
    schedule: str
    timezone: str | None = None  # UTC when absent, as Numaflow's


class SideInputSpec(Model):
    name: str = Field(pattern=NAME)
    pynumaflow: str | Callable[..., Any]  # the retriever: a SideInput, or () -> Response
    trigger: SideInputTrigger


def trigger_of(side: SideInputSpec, at: str) -> tuple[Schedule, tzinfo]:
    """The parsed schedule and timezone of ``side`` (``at``: its path in the spec)."""
    schedule = parse_schedule(side.trigger.schedule, f"{at}.trigger.schedule")
    zone = side.trigger.timezone or "UTC"
    try:
        return schedule, ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise errors.SpecError(
            f"{at}.trigger.timezone",
            f"{zone!r} is not a timezone",
            "use an IANA name such as UTC or America/Los_Angeles (Numaflow falls back to UTC silently)",
        ) from None
