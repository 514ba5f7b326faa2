"""Numaflow's idle-source watermark, pure: when an input has sent nothing for a while, move it on.

Numaflow (``rust/numaflow-core/src/watermark/idle/source.rs``): a source partition that read
nothing for ``threshold`` is idle; while it stays idle, every ``stepInterval`` its watermark is
published as the previous one plus ``incrementBy``, never past the wall clock. Tidal applies the
same rule to each *input* of a reduce vertex (each upstream edge, :mod:`tidal.spark.query.idle`),
and carries the moved watermark as a control row whose event time is the new value, so Spark's
watermark (max event time − delay) moves with it.

Everything here is in **event-time space**: ``t`` values are the event times a control row
carries. Spark subtracts ``allowedLateness + maxDelay`` from them, so "never past now −
``maxDelay``" for the watermark is "never past now" for ``t``.

Two Tidal rules more, both so that a quiet pipeline comes to rest:

- **Nothing waits upstream** (``drained``): an input whose upstream still holds messages is not
  idle (they may carry older event times, which an idle step would make late); Numaflow's source
  idles only when it reads nothing, which is the same at the source.
- **An input that never sent anything** holds the watermark back (a join's other inputs wait
  for it, :mod:`tidal.spark.query.reduce`) until ``initSourceDelay`` has passed since the start,
  when its watermark becomes now, as Numaflow's; without ``initSourceDelay`` it holds it for good.
- **A horizon**: steps stop once the input's ``t`` reaches the vertex's latest data event time plus
  the span that closes every window holding it (window length + lateness + maxDelay). Past it
  there is nothing left to close, so no more control rows are written, the input buffer drains
  and a vertex may scale to zero (Numaflow keeps publishing heartbeats; Tidal has no need to).

Time is an argument (seconds); no clock is read here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["IdleParams", "InputIdle", "horizon", "observe", "step"]


@dataclass(frozen=True, slots=True)
class IdleParams:
    """``watermark.idleSource`` in seconds (:class:`tidal.spec.watermark.IdleSourceSpec`)."""

    threshold: float
    increment_by: float
    step_interval: float = 0.0
    init_source_delay: float | None = None


@dataclass(frozen=True, slots=True)
class InputIdle:
    """One input's idle state: when it last sent data (or was last seen busy upstream), the
    latest event time it carried (data or idle step; None: nothing yet), its last step."""

    quiet_since: float
    last_t: float | None = None
    stepped_at: float | None = None


def observe(state: InputIdle, now: float, latest_t: float | None) -> InputIdle:
    """Data arrived from this input at ``now``, the latest with event time ``latest_t``: it is
    busy again (Numaflow's ``reset``)."""
    last = state.last_t if latest_t is None else max(latest_t, state.last_t or latest_t)
    return InputIdle(quiet_since=now, last_t=last, stepped_at=None)


def horizon(latest_data_t: float | None, span: float) -> float | None:
    """The event time past which an idle step closes nothing more: the vertex's latest data
    event time plus ``span`` (None: the vertex saw no data, nothing to close)."""
    return None if latest_data_t is None else latest_data_t + span


def step(
    state: InputIdle, params: IdleParams, now: float, *, drained: bool, until: float | None
) -> tuple[InputIdle, float | None]:
    """The input's state after ``now`` and the event time of the control row to write (None:
    none). ``drained``: nothing waits upstream of it; ``until``: :func:`horizon`."""
    if not drained:
        return replace(state, quiet_since=now, stepped_at=None), None
    if until is None or (state.last_t is not None and state.last_t >= until):
        return state, None  # the vertex has no data yet, or nothing is left to close
    if state.last_t is None:  # never sent anything: Numaflow starts it at now after initSourceDelay
        delay = params.init_source_delay
        if delay is None or now - state.quiet_since < delay:
            return state, None
        return InputIdle(quiet_since=state.quiet_since, last_t=now, stepped_at=now), now
    if now - state.quiet_since < params.threshold:
        return state, None
    if state.stepped_at is not None and now - state.stepped_at < params.step_interval:
        return state, None
    t = min(state.last_t + params.increment_by, now)  # Numaflow: never a watermark in the future
    if t <= state.last_t:
        return state, None  # its data is ahead of the clock: nothing to move
    return InputIdle(quiet_since=state.quiet_since, last_t=t, stepped_at=now), t
