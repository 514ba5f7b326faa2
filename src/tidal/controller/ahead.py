"""Ahead of a periodic load: what ``policy: tidal`` does with the rises it learns.

:class:`~tidal.scaling.periodic.RiseWatch` learns when the arrivals rise, how long a rise lasts
and what it brings; :class:`RisesAhead` turns that into the policy's moves, so that
:mod:`tidal.controller.adaptive` asks one question of it per rule:

* **When to ask** — a start-up and a tick before the next rise is due (:meth:`RisesAhead.lead`),
  and once asked, until the earliest the rise may come: a start-up learnt shorter meanwhile
  must not take the pre-scale back.
* **How many** — the fewest replicas that clear the rise within half the catch-up of its end
  (:meth:`RisesAhead.fewest`), not the count its peak rate needed: a rise under way is held
  through at the catch-up (``Rule.RISE_ENDS``), and half of it leaves that check the margin
  of the second of the rise already waiting at its first reading.
* **How long to keep them** — while the next rise would ask for them again within a start-up
  of their going: two start-ups and a tick ahead (:meth:`RisesAhead.keep_for`).
* **When to let go early** — once two periods agree (or one from the rise a run started
  under, placed by its fall) and the next rise is further than that,
  an idle vertex goes to ``scale.min`` after a quiet spell instead of after three start-ups
  (:meth:`RisesAhead.far`).

Pure: time is an argument.
"""

from __future__ import annotations

from tidal.scaling import NumaflowScale
from tidal.scaling.periodic import Forecast, RiseWatch

__all__ = ["RisesAhead"]


class RisesAhead:
    """The rises of one vertex's arrivals, and the pre-scale last asked for them."""

    def __init__(self, tick: float, catch_up: float) -> None:
        self.watch = RiseWatch()
        self.tick = tick  # a pre-scale comes a start-up and a tick ahead of the rise
        self.catch_up = catch_up  # the policy's: what a rise under way is held through with
        self.pre_scaled_for: float | None = None  # the earliest the rise last pre-scaled for may come

    def observe(self, now: float, lately: float, backlog: float, batch: int) -> None:
        """One measured reading. More than a second of a rise's arrivals and a micro-batch
        waiting, a low reading is a stall, not a quiet (:meth:`RiseWatch.backed_up`)."""
        backed_up = self.watch.backed_up(backlog, lately, batch)
        self.watch.observe(now, lately, backed_up=backed_up)

    def keep_for(self, startup: float) -> float:
        """How far ahead a forecast rise keeps the replicas it needs: two start-ups and a tick.
        Let go sooner, they are asked for again (a start-up and a tick before the rise) within a
        start-up of going, and start cold."""
        return 2 * startup + self.tick

    def lead(self, now: float, startup: float) -> float:
        """How far ahead a rise is sized for: a start-up and a tick; once pre-scaled, at least
        until the rise it was asked for may come. A start-up learnt shorter meanwhile (the new
        replica ready in a second) let the next tick take the pre-scale back: the cluster's
        bursts, `orders` 1 → 2 → 1 in a second, 6 s before the rise, and 1 → 2 again as it came."""
        lead = startup + self.tick
        return lead if self.pre_scaled_for is None else max(lead, self.pre_scaled_for - now)

    def kept(
        self, now: float, startup: float, backlog: float, low: float, capacity: float
    ) -> tuple[Forecast, int, str] | None:
        """The rise a drained vertex keeps replicas for, how many (:meth:`fewest`) and what the
        reason adds: due within :meth:`keep_for` (or the pre-scale's :meth:`lead`, if longer),
        from the first low reading after the last rise, not only after the quiet spell a
        pre-scale waits for (a burst's backlog drained into the lead of the next, and `enrich`
        went 6 → 1 as it drained, to be pre-scaled 1 → 6 at the rise)."""
        due = self.due(now, max(self.lead(now, startup), self.keep_for(startup)), quiet=False)
        if due is None:
            return None
        return (due, *self.fewest(due, backlog, low, capacity))

    def due(self, now: float, lead: float, *, quiet: bool = True) -> Forecast | None:
        """The next rise if it is due within ``lead`` s (see :meth:`RiseWatch.due_within`)."""
        return self.watch.due_within(now, lead, quiet=quiet)

    def fewest(self, due: Forecast, backlog: float, low: float, capacity: float) -> tuple[int, str]:
        """What a forecast rise is asked for and kept for, and what the reason adds: the fewest
        replicas that clear it within half the catch-up after it ends, not the count its peak
        rate needed. A rise under way is held through if its replicas clear it within the whole
        catch-up (``Rule.RISE_ENDS``); planned for with half, the count still passes that check
        at the rise's first reading, which finds a second of it already waiting (planned for the
        whole, 2 of `enrich`'s ~370/s cleared a 5 s burst of 2,000/s 14.8 s after it began, read
        17.8 s at the rise, and went 2 → 7 every burst). On the cluster's bursts `enrich` was held
        at the burst's 6 through every quiet spell: 4 executors from the second minute on, 797
        executor-s where Numaflow's rules paid 635 (2026-12-06)."""
        within = self.catch_up / 2
        enough = due.fewest(backlog, capacity, low, within)
        if enough >= due.replicas:
            return due.replicas, ""
        return enough, f", {enough} clear it within {within:g} s of its end"

    def pre_scale(
        self,
        now: float,
        lately: float,
        backlog: float,
        replicas: int,
        capacity: float,
        startup: float,
        scale: NumaflowScale,
    ) -> tuple[int, str, float] | None:
        """The replicas to ask for now, a start-up before the next rise, why, and when the rise
        is due; ``None`` if no rise is due that the replicas there do not clear within the
        catch-up after it."""
        due = self.due(now, self.lead(now, startup))
        if due is None:
            return None
        enough, clear = self.fewest(due, backlog, lately, capacity)
        wanted = min(scale.max, max(scale.min, enough))
        if wanted <= replicas:
            return None
        under = self.watch.low_share * self.watch.peak
        low = f"{lately:.0f}/s lately, low (≤ {under:.0f}/s) for {self.watch.low_for(now):.0f} s"
        self.pre_scaled_for = due.at - due.spread  # the earliest the rise may come
        return wanted, f"pre-scaled: {due.reason(now)}{clear}; {low}", due.at

    def far(self, now: float, startup: float) -> Forecast | None:
        """The next rise, if two periods agree on it (or its one period began at the rise the run
        started under, placed by its fall) and it is more than :meth:`keep_for` away: replicas
        stopped now and asked for again a start-up before it cost a start-up instead of the
        whole quiet spell.

        A placed period is the one a run that starts under load learns at its second rise's
        end, and the pre-scale already acts on it; waiting for agreement instead held the
        cluster's second wave three start-ups (20-26 s) and its executors the allocator's 10 s
        idle (2026-12-07). Any single period, tried in the simulator: idle 1.18× the oracle
        instead of 1.27×, waves 0.99× instead of 1.02×, but 6-12 more actions on four bursty
        seeds of ten (random gaps that happen to agree once), so it is only the placed one."""
        ahead = self.watch.forecast(now)
        if ahead is None or not (ahead.agreed or ahead.placed):
            return None
        return ahead if ahead.at - ahead.spread - now > self.keep_for(startup) else None
