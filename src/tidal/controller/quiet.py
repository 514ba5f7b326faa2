"""``policy: tidal`` with nothing to size on: a vertex with nothing to do, or nothing known.

* **Idle** (:func:`when_idle`) — nothing arriving, nothing pending: keep the replicas while that
  costs less than starting them again, then go to ``scale.min``. Three start-ups: a restart
  costs one of replica-time and one of delay, and a gap that has lasted that long tends to go on
  (gaps between bursts are heavy-tailed); shorter keeps cost more restarts than they save.
  (Keeping one replica after one start-up instead, tried in the simulator: 1.33× the oracle on
  idle instead of 1.44×, but 161-270 actions on bursty against 41-100.) A learnt rise changes
  both ends: replicas it would ask for again within a start-up are kept, and once two periods
  agree, replicas go as soon as the quiet spell before a rise has passed
  (:mod:`tidal.controller.ahead`).
* **Unknown** (:func:`when_unknown`) — pending not available: a Kafka broker that does not
  answer, a user or pynumaflow source whose ``pending()`` is negative or raises, a reader whose
  report is stale. (A source's reader reports at every trigger, also at 0 replicas, where its
  query runs and admits nothing.) A backlog not known is no idle vertex: it is left alone, as
  Numaflow's rules leave it, and a source at 0 peeks with 1 after ``zeroReplicaSleepSeconds``,
  as Numaflow's does. Read as idle instead, a Kafka source whose broker went away was taken to
  its default ``min`` of 0 three start-ups later, and a source that never says its pending went
  to 0 and never woke: nothing it reported could wake it.

Pure: each returns a :class:`Verdict` the policy turns into its decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidal.controller.ahead import RisesAhead
from tidal.controller.policy import PolicyInput
from tidal.scaling import NumaflowScale, Rule

__all__ = ["Verdict", "when_idle", "when_unknown"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do: go ``to`` replicas (``None``: keep them) by ``rule``, for ``reason``."""

    to: int | None
    rule: Rule
    reason: str


def when_idle(view: PolicyInput, low: int, idle: float, startup: float, ahead: RisesAhead | None) -> Verdict:
    """Idle for ``idle`` seconds with replicas that start in ``startup``: keep or go to ``low``."""
    keep = 3 * startup
    due = None if ahead is None else ahead.due(view.now, ahead.keep_for(startup))
    if due is not None and view.replicas > low and idle >= keep:
        # Gone now, they would be asked for again within a start-up of coming back.
        return Verdict(None, Rule.STEADY, f"idle {idle:.0f} s, kept: {due.reason(view.now)}")
    # Over once the quiet spell a rise needs before it has passed, or at once if the rise
    # fell after lasting as long as rises do (RiseWatch.ran_its_length).
    ran = None if ahead is None or idle >= ahead.watch.quiet else ahead.watch.ran_its_length()
    if ahead is not None and view.replicas > low and (idle >= ahead.watch.quiet or ran is not None):
        far = ahead.far(view.now, startup)
        if far is not None:
            # The next rise is known (two periods agree) and far: stopped now and asked for
            # again a start-up before it, the replicas cost a start-up instead of the whole
            # quiet spell (on a cluster, the executors they hold: 3 × 13 s of 3 after a wave).
            over = f" after a rise of {ran[0]:.0f} s, as rises last ({ran[1]:.0f} s)" if ran else ""
            reason = f"idle {idle:.0f} s{over}; {far.reason(view.now)}: back a start-up before it"
            return Verdict(low, Rule.SCALE_TO_ZERO, reason)
    # Why no rise keeps them (or when the next comes): a reacted-to wave's log says it.
    outlook = "" if ahead is None else f"; {ahead.watch.outlook(view.now)}"
    if view.replicas > low and idle >= keep:
        # Also with replicas still "starting": on Spark a replica counts as ready once a
        # micro-batch ran on it, which needs messages; one asked for as a wave ended never
        # becomes ready, and waiting for it kept 4 replicas of the demo's `enrich` through a
        # whole 70 s quiet spell (280 replica-seconds of a run's 830).
        return Verdict(
            low, Rule.SCALE_TO_ZERO, f"idle {idle:.0f} s, past three start-ups ({keep:.0f} s){outlook}"
        )
    if view.ready < view.replicas:  # woken ahead of its messages (the path): let them come
        reason = f"idle {idle:.0f} s, {view.replicas - view.ready} starting (to {low} after {keep:.0f} s)"
        return Verdict(None, Rule.NOT_READY, reason)
    return Verdict(None, Rule.STEADY, f"idle {idle:.0f} s (to {low} after {keep:.0f} s){outlook}")


def when_unknown(view: PolicyInput, scale: NumaflowScale) -> Verdict:
    """Pending not available: keep the replicas (into ``min`` if below); a source at 0 peeks."""
    low, since = scale.min, view.now - view.last_scaled_at
    if view.replicas < low:
        return Verdict(low, Rule.INTO_BOUNDS, f"{view.replicas} below min {low}")
    if view.replicas == 0 and view.kind.reads_source:
        sleep = scale.zero_replica_sleep_seconds
        at_zero = f"at 0 for {since:.0f} s, pending not available"
        if since >= sleep:
            return Verdict(1, Rule.PEEK, f"{at_zero}: ≥ zeroReplicaSleepSeconds {sleep:.0f}, peek with 1")
        return Verdict(None, Rule.ZERO_WAIT, f"{at_zero}: peek after zeroReplicaSleepSeconds {sleep:.0f}")
    return Verdict(None, Rule.METRICS_UNAVAILABLE, "pending not available: leave alone")
