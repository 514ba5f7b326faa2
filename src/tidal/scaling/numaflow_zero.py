"""Numaflow's vertex at zero replicas, and Tidal's two wake-ups (the activator for buffers, the path).

* :func:`decide_at_zero` — step 8 of :func:`tidal.scaling.numaflow.decide`: a UDF or sink wakes to 1
  when its buffer has pending; a source peeks (→ 1) after ``zeroReplicaSleepSeconds``; ``min > 0``
  is honoured (deliberate difference, upstream issue #2220).
* :func:`wake_from_zero` — Tidal's activator: a vertex at zero with messages waiting wakes at once,
  without the cooldown.
* :func:`wake_on_path` — the vertices at zero downstream of one that woke wake in the same tick.
"""

from __future__ import annotations

from tidal.scaling.decision import Decision, Rule
from tidal.scaling.decision import hold as _hold
from tidal.scaling.decision import move as _move
from tidal.scaling.numaflow_estimate import VertexObservation
from tidal.scaling.numaflow_scale import NumaflowScale

__all__ = ["decide_at_zero", "wake_from_zero", "wake_on_path"]


def decide_at_zero(
    scale: NumaflowScale, obs: VertexObservation, now: float, since: float, low: int
) -> Decision:
    """Step 8: a UDF/sink wakes on pending; a source peeks after ``zeroReplicaSleepSeconds``."""
    if low > 0:
        return _move(obs, now, low, Rule.INTO_BOUNDS, f"at 0, below min {low}: set to {low}", low)
    if not obs.kind.reads_source:
        waiting = sum(b.pending for b in obs.buffers)
        if waiting > 0:
            return _move(
                obs,
                now,
                1,
                Rule.WAKE_ON_PENDING,
                f"{waiting} messages in the buffer: wake to 1",
                1,
                {"pending": waiting},
            )
        return _hold(obs, now, Rule.ZERO_WAIT, "at 0 and the buffer is empty", None, {"pending": 0})
    sleep = scale.zero_replica_sleep_seconds
    if since >= sleep:
        return _move(
            obs,
            now,
            1,
            Rule.PEEK,
            f"at 0 for {since:.0f} s ≥ zeroReplicaSleepSeconds {sleep:.0f}: peek with 1",
            1,
        )
    return _hold(obs, now, Rule.ZERO_WAIT, f"at 0 for {since:.0f} s < zeroReplicaSleepSeconds {sleep:.0f}")


def wake_on_path(scale: NumaflowScale, obs: VertexObservation, now: float, woken: str) -> Decision | None:
    """Wake a vertex at zero because ``woken``, upstream of it, just woke: Tidal's path wake-up.

    Without it, a chain at zero starts one vertex at a time: each wakes only when the first
    messages reach its buffer, so a cold start costs the sum of the start-up delays
    (``tidal bench decisions``: 28 s for three vertices that start in 8 s each). Waking the
    whole path together overlaps them. Numaflow has no such rule; Knative's activator serves a
    single revision. The woken vertex then counts as just scaled, so its scale-down cooldown
    keeps it up until the messages arrive.

    ``None`` when this does not apply (not at zero, disabled, or ``max`` is 0).
    """
    if scale.disabled or obs.replicas != 0:
        return None
    target = min(max(1, scale.min), scale.max)
    if target <= 0:
        return None
    return _move(
        obs,
        now,
        target,
        Rule.WAKE_ON_PATH,
        f"upstream {woken!r} woke: wake to {target} now, ahead of its messages",
        target,
        {"upstream": woken},
    )


def wake_from_zero(scale: NumaflowScale, obs: VertexObservation, now: float) -> Decision | None:
    """Tidal's activator for buffers: a vertex at 0 replicas with messages waiting wakes now.

    Deliberate differences from Numaflow:

    - In Numaflow the cooldown check comes first, so a UDF or sink scaled to zero a minute ago
      leaves its first new message waiting for up to 90 s. Knative's activator does not wait,
      and neither does Tidal.
    - A source at zero that *reports* pending (its ``pending()`` answers a positive number) wakes
      at once too. Numaflow peeks at a source only every ``zeroReplicaSleepSeconds``, because it
      cannot know; a source that can say so need not sleep. A source whose pending is not
      available still follows ``zeroReplicaSleepSeconds`` (in :func:`decide`).

    ``None`` when this does not apply (then call :func:`decide`).
    """
    if scale.disabled or obs.replicas != 0:
        return None
    if obs.kind.reads_source:
        reported = [p.pending for p in obs.partitions if p.pending is not None and p.pending > 0]
        waiting = int(sum(reported))
        where = "reported by the source"
    else:
        waiting = sum(b.pending for b in obs.buffers)
        where = "waiting"
    target = min(max(1, scale.min), scale.max)
    if waiting <= 0 or target <= 0:
        return None
    return _move(
        obs,
        now,
        target,
        Rule.WAKE_ON_PENDING,
        f"{waiting} message{'s' if waiting != 1 else ''} {where} at 0 replicas: "
        f"wake to {target} now (activator: no cooldown)",
        target,
        {"pending": waiting},
    )
