"""A vertex's ``scale:`` block as the scaling core's :class:`~tidal.scaling.NumaflowScale`."""

from __future__ import annotations

import logging
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tidal import errors
from tidal.scaling import CronExpr, CronSchedule, CronSpec, NumaflowScale, normalise_scale
from tidal.spec.model import ScaleSpec

__all__ = ["numaflow_scale"]

log = logging.getLogger("tidal.spec")


def numaflow_scale(scale: ScaleSpec, at: str = "") -> NumaflowScale:
    """The scaling core's policy for a vertex's ``scale:`` block; errors carry ``at`` as prefix.

    Absent fields take :class:`~tidal.scaling.NumaflowScale`'s defaults, and what Numaflow's
    getters normalise is normalised the same way (:func:`~tidal.scaling.normalise_scale`), with a
    logged notice; an empty cron ``timezone`` means UTC, as upstream reads it.
    """
    prefix = f"{at}." if at else ""
    cron = None
    try:
        if scale.cron is not None:
            zone = scale.cron.timezone or "UTC"
            try:
                tz = ZoneInfo(zone)
            except (ZoneInfoNotFoundError, ValueError):
                raise errors.SpecError(
                    "scale.cron.timezone",
                    f"unknown time zone {scale.cron.timezone!r}",
                    "use an IANA name like Europe/Paris",
                ) from None
            cron = CronSpec(
                tuple(
                    CronSchedule(
                        CronExpr.parse(s.start, f"scale.cron.schedules[{k}].start"),
                        CronExpr.parse(s.end, f"scale.cron.schedules[{k}].end"),
                        s.min,
                        s.max,
                    )
                    for k, s in enumerate(scale.cron.schedules)
                ),
                tz,
                zone,
            )
        given = scale.model_dump(exclude={"cron", "replicas_per_scale"}, exclude_none=True)
        result, notices = normalise_scale({**given, "cron": cron}, scale.replicas_per_scale)
    except errors.SpecError as exc:
        raise errors.SpecError(prefix + exc.path, exc.problem, exc.fix) from None
    for notice in notices:
        if (prefix, notice) not in _NOTIFIED:  # once per field per process: the spec is read often
            _NOTIFIED.add((prefix, notice))
            log.warning("%s%s", prefix, notice)
    return result


_NOTIFIED: set[tuple[str, str]] = set()
