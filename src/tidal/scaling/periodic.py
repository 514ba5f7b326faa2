"""When will the load rise next? Rises of a periodic load, learnt from the arrivals.

A load that rises on a schedule (the demo's waves every 110 s, a batch upstream every hour, a
square wave) is predictable after one period, and none of Numaflow, Knative or Spark's dynamic
allocation uses that: each sees the rise when it comes and then pays a start-up (on a cluster a
new executor runs its first task 11-21 s after the request) with the backlog growing meanwhile.
:class:`RiseWatch` learns when the arrivals rise and how many replicas the last rise needed, so a
policy can ask for them one start-up ahead (:mod:`tidal.controller.adaptive` does).

What counts as a rise: the arrival rate goes from *low* (at most ``low_share`` of the recent
peak) to *high* (at least ``high_share`` of it), after being low for ``quiet_seconds`` at least;
in between, it stays what it was (a Schmitt trigger, so a peak that decays through a long low
spell does not lose the spell).
The quiet spell is what keeps a micro-batch runtime from inventing rises: measured once a second,
a steady stream on Spark reads 0 on a tick with no batch committed and the full rate on the next.
The peak decays with a half-life of ``peak_half_life`` seconds, so a load that settles lower is
measured against what it does now.

When the next rise is due: the last rise plus the median of the last three periods that agree
with the latest one, brought forward by how far they spread. A run that starts under load
has seen no rise for its first high phase, only its fall: once the next rise has ended too, the
first is placed where that fall says it was, its fall less the next rise's length, and taken
to last as long (a periodic load's rises last alike; a late reading of the next rise cancels
out of the period). On the cluster's waves the run starts under the first wave, and its period
was known only from the third rise, which left the third wave reacted to (150 executor-s where a
learnt one took 102-109, 2026-12-06); placed, it is known from the second wave's end (the third
wave pre-scaled in two runs of three, 2026-12-07). Trusted after one period (two
rises) if the two rises needed about as many replicas, else once a second period agrees (a
run's start and a spike a minute later are not a pattern); a rise that does not come within
``tolerance`` of the period (or ``quiet`` seconds, if more) is a *miss*, and after a miss the
watch predicts again only once two consecutive periods agree within ``tolerance``: on a trace of
random bursts (Pareto gaps) it pays for one early start, not one per burst.

How long a rise lasts: its high phase, from the rise to a reading's interval after its last
reading at the high share (or to the first under it, if sooner). The phase closes once a low
spell of ``quiet_seconds`` follows (a reading or two low mid-rise do not end it, nor does a
stall), but what it lasted is how long the *arrivals* stayed high, not how long the backlog
they left took to drain: measured to the end of the stall after it, the cluster's 5 s bursts
lasted 17-20 s, which made `orders`' one replica look too slow for the next burst, pre-scaled
it, and restarted the source as the burst came (2026-12-06). Once the last two
agree (within the tolerance, or the quiet spell), :meth:`RiseWatch.rise_ends` says when the
rise under way ends (after the longest of the last three), so a policy can tell a burst the
replicas there absorb from a load that needs more (the cluster's 5 s bursts took `orders`
1 → 2 → 1 for each, two restarts of the source, where one replica cleared the burst 2 s after
it ended). A rise that goes on past that by the tolerance (or 2 s) is a load that stays.

Pure: time is an argument, nothing is read from a clock.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from itertools import pairwise

__all__ = ["Forecast", "RiseEnd", "RiseWatch"]


@dataclass(frozen=True, slots=True)
class Forecast:
    """The next rise: due at ``at`` (seconds), every ``period`` s so far over ``rises`` rises, and
    ``replicas`` is what the arrivals alone needed at the last one (its most over the high phase)."""

    at: float
    period: float
    rises: int
    replicas: int
    agreed: bool = False  # the last two periods agree: seen twice, not once
    spread: float = 0.0  # how far the recent periods fell from ``period``: the rise may come that early
    rate: float = 0.0  # the most that arrived a second in the last rise's high phase
    lasts: float | None = None  # how long a rise's high phase lasts, once two agree (RiseEnd)
    placed: bool = False  # the oldest rise counted was placed by its fall (the run started under it)

    def clears(self, backlog: float, capacity: float, low: float) -> float:
        """Seconds from the rise until ``backlog`` and what it brings are gone at ``capacity``/s
        (it arrives at :attr:`rate` for :attr:`lasts` s, then ``low``/s); infinite while how
        long a rise lasts is not known."""
        if self.lasts is None:
            return math.inf
        return RiseEnd(self.lasts, self.lasts, self.rises, low).clears(backlog, capacity, self.rate)

    def fewest(self, backlog: float, per_replica: float, low: float, within: float) -> int:
        """The fewest replicas, up to :attr:`replicas`, that clear ``backlog`` and the rise within
        ``within`` s of its end at ``per_replica``/s each (``low``/s arriving after it): what the
        rise needs to be gone that soon after it, not what its peak rate needs. All of
        :attr:`replicas` while how long a rise lasts is not known."""
        if self.lasts is None or per_replica <= 0:
            return self.replicas
        for count in range(1, self.replicas):
            if self.clears(backlog, count * per_replica, low) <= self.lasts + within:
                return count
        return self.replicas

    def reason(self, now: float) -> str:
        due = self.at - now
        when = f"due in {due:.0f} s" if due >= 0.5 else f"due {-due:.0f} s ago"
        placed = ", the first placed by its fall" if self.placed else ""
        return (
            f"the load rose every {self.period:.0f} s ({self.rises} rises{placed}), the next rise is {when}; "
            f"the last one needed {self.replicas}"
        )


@dataclass(frozen=True, slots=True)
class RiseEnd:
    """When the rise under way ends: its high phase lasted ``lasts`` s the last ``seen`` times
    (the longest of the last three), ``left`` s of it remain, and ``low`` per second arrived in
    the low spell before it, which is what comes after."""

    left: float
    lasts: float
    seen: int
    low: float

    def clears(self, backlog: float, capacity: float, arriving: float) -> float:
        """Seconds until ``backlog`` is gone at ``capacity``/s, with ``arriving``/s for the rest
        of the rise and :attr:`low`/s after it; infinite if it never is."""
        net = capacity - arriving  # what the backlog falls by a second while the rise lasts
        if net >= 0 and backlog <= net * self.left:
            return max(0.0, backlog) / net if net > 0 else 0.0
        after = capacity - self.low
        return math.inf if after <= 0 else self.left + (backlog - net * self.left) / after

    def reason(self) -> str:
        return (
            f"the rise ends in {self.left:.0f} s (its high phase lasted {self.lasts:.0f} s, {self.seen} seen)"
        )


class RiseWatch:
    """Learns the rises of the arrivals at one vertex; see the module docstring."""

    def __init__(
        self,
        *,
        high_share: float = 0.5,
        low_share: float = 0.25,
        quiet_seconds: float = 5.0,
        tolerance: float = 0.2,
        min_period: float = 10.0,
        peak_half_life: float = 600.0,
        remember: int = 4,
    ) -> None:
        if not 0 < low_share < high_share <= 1:
            raise ValueError(f"need 0 < low_share < high_share <= 1, got {low_share} and {high_share}")
        self.high_share, self.low_share = high_share, low_share
        self.quiet, self.tolerance, self.min_period = quiet_seconds, tolerance, min_period
        self.half_life = peak_half_life
        self._peak = 0.0
        self._at: float | None = None  # the last observation
        self._low_since: float | None = None  # low since then (None: not low now)
        self._high = False
        self._rises: deque[float] = deque(maxlen=remember)
        self._needs: deque[int] = deque(maxlen=remember)  # the most needed in each rise's high phase
        self._rates: deque[float] = deque(maxlen=remember)  # the most arrived in each high phase
        self._highs: deque[float] = deque(maxlen=remember)  # how long each ended high phase lasted
        self._seen_highs = 0  # how many of them were measured (a placed rise's is assumed)
        self._low_rate = 0.0  # the most arrived in the current low spell
        self._before: float = 0.0  # … and in the one before the last rise
        self._open = False  # the last rise's high phase has not ended yet
        self._fell_at: float | None = None  # when the arrivals fell under the high share (see observe)
        self._high_until: float | None = None  # the last reading at it, plus the interval before it
        self._trusted = True  # False after a miss, until two periods agree
        # The high phase the run started under, which no rise began (see _place_first):
        self._initial = False  # under way
        self._initial_fell: float | None = None  # where it fell, once it ended
        self._initial_need, self._initial_rate = 0, 0.0  # what it needed, what arrived at most
        self._placed: float | None = None  # the rise placed by that fall

    @property
    def rises(self) -> tuple[float, ...]:
        """When the load rose, oldest first (the last ``remember``)."""
        return tuple(self._rises)

    def note_needed(self, replicas: int) -> None:
        """What the arrivals alone needed at the last observation: the most of a rise's high
        phase is what the next rise is given ahead of time."""
        if self._high and self._needs:
            self._needs[-1] = max(self._needs[-1], replicas)
        elif self._initial:
            self._initial_need = max(self._initial_need, replicas)

    def backed_up(self, waiting: float, rate: float, batch: int) -> bool:
        """Does ``waiting`` make a low reading a stall (:meth:`observe`)? More than a micro-batch
        (``batch``), than a second of ``rate`` and than a second of a rise's arrivals (the high
        share of the peak) waits. Without the last, a quiet spell's own small backlog was a
        stall: on the cluster's bursts `enrich` went 6 → 1 five seconds into a quiet spell, its
        query's restart piled up 525–675 of the 100/s arriving, one reading of 0/s over 525
        waiting cleared the spell, the next burst came three seconds into a new one, and that
        rise was never learnt (2026-11-30). A stall under a rise's load (the first wave's
        executors starting with 7,380 waiting) is well over a second of it."""
        return waiting > max(rate, batch, self.high_share * self._peak)

    def observe(self, now: float, rate: float, *, backed_up: bool = False) -> bool:
        """Arrivals ``rate``/s at ``now``. True when a rise starts at this observation.

        ``backed_up``: more waits than the vertex takes in at once (:meth:`backed_up`). A reading
        under the high share then is a stall (a query restarting, executors starting), not a
        quiet: it neither starts a low spell nor continues one. On a cluster the demo's first
        wave read low for seconds while its executors started with 7,380 waiting, and its end
        at 20 s was taken for a rise: with the next wave's at 108 s, a period of 88 s where the
        waves come every 110 s, and a pre-scale 18 s early (2026-11-29).

        A quiet spell already as long as a rise needs stands, though: a rise's backlog is often
        seen a tick before its rate (a source's count comes with its next report, its pending
        at once). On the cluster's bursts `enrich`, sized on its source's counts, read 0/s with
        1,252 waiting at each burst's first tick after 15 s of quiet, then 1,975/s: the spell
        was wiped and the rise missed, so it learnt three rises in 240 s out of eight and
        pre-scaled for none (2026-11-29, night)."""
        before = now if self._at is None else self._at
        if self._at is not None and now > self._at:
            self._peak *= 0.5 ** ((now - self._at) / self.half_life)
        self._at = now
        self._peak = max(self._peak, rate)
        self._check_miss(now)
        self._note_fall(now, rate, max(0.0, now - before))
        if backed_up and (self._peak <= 0 or rate < self.high_share * self._peak):
            if self._high or self._low_since is None or now - self._low_since < self.quiet:
                self._low_since = None  # a stall: no quiet spell starts, or goes on
            return False
        if self._peak <= 0:  # nothing yet: quiet, so the first load to come is a rise
            self._low_since = now if self._low_since is None else self._low_since
            return False
        rose = False  # a Schmitt trigger: low until high, high until low; in between, as it was
        if rate <= self.low_share * self._peak:
            if self._high or self._low_since is None:
                self._low_rate = rate
            self._high = False
            if self._low_since is None:
                self._low_since = now
            self._low_rate = max(self._low_rate, rate)
        elif rate >= self.high_share * self._peak:
            quiet_long = self._low_since is not None and now - self._low_since >= self.quiet
            if quiet_long and not self._high:
                rose = self._rise(now)
            elif not self._high and not self._rises and self._initial_fell is None:
                self._initial = True  # high with no quiet spell before it: the run started under it
            self._high, self._low_since = True, None
        if self._high and self._rates:
            self._rates[-1] = max(self._rates[-1], rate)
        elif self._high and self._initial:
            self._initial_rate = max(self._initial_rate, rate)
        if self._initial and self._low_since is not None and now - self._low_since >= self.quiet:
            self._initial_fell = self._low_since if self._fell_at is None else self._fell_at
            self._initial = False
        if self._open and self._low_since is not None and now - self._low_since >= self.quiet:
            # The high phase ended where a low spell began that lasted as long as the one a
            # rise needs: a reading or two low mid-rise does not end it (on the cluster, the
            # source's lagging reports cut 5 s bursts into phases of 1, 11, 1 and 13 s).
            fell = self._low_since if self._fell_at is None else self._fell_at  # set by the first low reading
            self._highs.append(fell - self._rises[-1])
            self._seen_highs += 1
            self._open = False
            self._place_first(fell)
        return rose

    def _place_first(self, fell: float) -> None:
        """The first rise seen has ended at ``fell``: if the run started under a high phase
        that no rise began, place that phase's rise where its fall says it was (the module
        docstring), lasting as long as the next, which is what placed it: its length is assumed,
        not measured (``RiseEnd.seen`` counts measured ones), and a rise that outlasts it is a
        load that stays, as ever. Not if that is within ``min_period`` of the first rise seen."""
        if len(self._rises) != 1 or self._initial_fell is None or self._placed is not None:
            return
        at = self._initial_fell - (fell - self._rises[0])
        if self._rises[0] - at < self.min_period:
            return
        self._placed = at
        self._rises.appendleft(at)
        self._highs.appendleft(fell - self._rises[-1])  # as long as the next: what placed it
        self._needs.appendleft(self._initial_need)
        self._rates.appendleft(self._initial_rate)

    def _note_fall(self, now: float, rate: float, gap: float) -> None:
        """Where the arrivals fell under the high share, whatever waits (a stall or a drain
        after it): a reading's gap after the last reading at it, or at the first under it if
        sooner. Readings left out in between (the counts frozen while a query restarts) hide
        when; taken as seen, the length errs short, which :meth:`rise_ends` allows for. At the
        first reading under it instead, the cluster's bursts read 8 and 12 s: `orders`'
        restart at each burst froze the counts for 4-7 s just as the burst ended (2026-12-06)."""
        if rate >= self.high_share * self._peak:  # (no interval before a run's first reading)
            self._fell_at, self._high_until = None, now + gap if gap > 0 else None
        elif self._fell_at is None:
            self._fell_at = now if self._high_until is None else min(now, self._high_until)

    def _rise(self, now: float) -> bool:
        if self._rises and now - self._rises[-1] < self.min_period:
            return False
        self._rises.append(now)
        self._needs.append(0)
        self._rates.append(0.0)
        self._before = self._low_rate
        self._open = True
        periods = self._periods()
        if not self._trusted and len(periods) >= 2:
            self._trusted = self._agree(periods[-2], periods[-1])
        return True

    def _check_miss(self, now: float) -> None:
        """A rise overdue by more than the grace is a miss: distrust until two periods agree."""
        periods = self._periods()
        if self._trusted and periods and not self._high:
            self._trusted = now <= self._rises[-1] + periods[-1] + self._grace(periods[-1])

    def _periods(self) -> list[float]:
        return [b - a for a, b in pairwise(self._rises)]

    def _agree(self, a: float, b: float) -> bool:
        return abs(a - b) <= self.tolerance * max(a, b)

    @staticmethod
    def _alike(a: int, b: int) -> bool:
        """Did two rises need about as many replicas (within half the more, or one)? A periodic
        load repeats its rises; a run's start at 225/s (1 replica) and a spike to 2,250/s (6) a
        minute later are one period of nothing, and predicting from them pre-scaled `enrich` to 6
        for a spike that did not come (the cluster's spike, 2026-11-29: 19 s of 6 executors)."""
        return abs(a - b) <= max(1, max(a, b) // 2)

    def _grace(self, period: float) -> float:
        return max(self.tolerance * period, self.quiet)

    def forecast(self, now: float) -> Forecast | None:
        """The next rise, or ``None``: fewer than two rises, a miss not yet made up for, or
        the rise due is overdue by more than the grace (which makes it a miss); :meth:`outlook`
        says which."""
        outlook = self._outlook(now)
        return outlook if isinstance(outlook, Forecast) else None

    def outlook(self, now: float) -> str:
        """The next rise (:meth:`Forecast.reason`) or why none is forecast, for a reason: a run's
        third wave was reacted to instead of pre-scaled, and no line of its log said why
        (2026-12-07: one period between rises that needed 3, then 1, is no pattern)."""
        outlook = self._outlook(now)
        return outlook.reason(now) if isinstance(outlook, Forecast) else f"no rise forecast: {outlook}"

    def _outlook(self, now: float) -> Forecast | str:
        """The next rise, or why there is none."""
        periods = self._periods()
        if not periods:
            return f"{len(self._rises)} rise{'' if len(self._rises) == 1 else 's'} seen, 2 needed"
        if not self._trusted:
            return "a rise did not come when due, and two periods must agree again"
        # The median of the last periods that agree with the latest, and how far they spread: on
        # Spark a rise is seen 0-20 s after the load rose (the source's pending is stale while
        # its query restarts), so the periods of a 110 s wave read 111, 120, 106.
        recent = [x for x in periods[-3:] if self._agree(x, periods[-1])]
        period = statistics.median(recent)
        spread = max(abs(x - period) for x in recent)
        due = self._rises[-1] + period
        if now > due + self._grace(period) and not self._high:
            return f"the rise due {now - due:.0f} s ago did not come"  # the next observation makes it a miss
        agreed = len(periods) >= 2 and self._agree(periods[-2], periods[-1])
        if not agreed and not self._alike(self._needs[-2], self._needs[-1]):
            a, b = self._needs[-2], self._needs[-1]  # not yet a pattern
            return f"one period ({periods[-1]:.0f} s) between unlike rises (needed {a}, then {b})"
        lasts, placed = self._lasts(), self._placed is not None and self._placed in self._rises
        need, rate = max(1, self._needs[-1]), self._rates[-1]
        return Forecast(due, period, len(self._rises), need, agreed, spread, rate, lasts, placed)

    def _lasts(self) -> float | None:
        """How long a rise's high phase lasts: the longest of the last three, once the last two
        agree (within the tolerance, or the quiet spell: a 5 s burst reads 4-7 s at a tick a
        second); None before."""
        highs = list(self._highs)[-3:]
        if len(highs) < 2:
            return None
        a, b = highs[-2], highs[-1]
        if abs(a - b) > max(self.tolerance * max(a, b), self.quiet):
            return None
        return max(highs)

    def rise_ends(self, now: float) -> RiseEnd | None:
        """While the load is high: when this rise's high phase ends, if the rises before it
        agree on how long one lasts. None when it has outlasted that by more than the tolerance
        (or 2 s): the load stayed, and it is judged as a load that stays (a burst that turns
        into a step is scaled for as a step)."""
        lasts = self._lasts()
        if not self._high or not self._rises or lasts is None:
            return None
        into = now - self._rises[-1]
        if into > lasts + max(self.tolerance * lasts, 2.0):
            return None
        return RiseEnd(max(0.0, lasts - into), lasts, self._seen_highs, self._before)

    def ran_its_length(self) -> tuple[float, float] | None:
        """The rise under way, if its arrivals fell once it had lasted as long as rises last
        (within the band two lengths agree in, :meth:`_lasts`), before the quiet spell that
        closes its high phase has passed: (how long it lasted, how long rises last). With
        nothing arriving and nothing waiting, a policy need not wait out that spell to call the
        rise over: on the cluster's waves each learnt wave's two executors stayed 5 s past the
        wave's drain for it (2026-12-07). None while high, before two rises agree on a length,
        or once the spell has closed the phase (the rise is then plainly over)."""
        lasts = self._lasts()
        if lasts is None or not self._open or self._high or not self._rises:
            return None
        fell = self._low_since if self._fell_at is None else self._fell_at
        if fell is None:
            return None
        lasted = fell - self._rises[-1]
        return (lasted, lasts) if lasted >= lasts - max(self.tolerance * lasts, self.quiet) else None

    @property
    def peak(self) -> float:
        """The recent peak arrival rate (decayed), which low and high are shares of."""
        return self._peak

    def over_since(self, now: float) -> float | None:
        """When the last rise's load fell, once it has been low as long as a rise needs before
        it (``quiet``) and the next rise is forecast: that rise is over, and what it needed is
        no floor for the quiet spell. ``None`` otherwise (no rise yet, still high, not low long
        enough, or no period trusted)."""
        if not self._rises or self.low_for(now) < self.quiet or self.forecast(now) is None:
            return None
        return self._low_since

    def low_for(self, now: float) -> float:
        """How long the arrivals have been low (0 when they are not)."""
        return 0.0 if self._high or self._low_since is None else max(0.0, now - self._low_since)

    def due_within(self, now: float, lead: float, *, quiet: bool = True) -> Forecast | None:
        """The forecast if its rise is due within ``lead`` seconds from ``now``, counting its
        spread (or came due within the grace and the load has not risen yet), else ``None``.

        Only in a low spell as long as the one a rise needs before it (``quiet_seconds``): a
        low reading or two mid-load (on Spark, a tick with no batch committed) is not a quiet
        spell, and a rise cannot follow it. That is for asking for replicas; ``quiet=False``
        is for keeping them, from the first low reading: the cluster's bursts left a backlog
        that drained into the lead of the next one, and `enrich` went 6 → 1 as it drained, to
        be pre-scaled 1 → 6 five seconds later, at the rise, once the spell was long enough
        (2026-12-06)."""
        if self._high:
            return None  # risen already: the policy sees the load itself
        if quiet and self.low_for(now) < self.quiet:
            return None
        forecast = self.forecast(now)
        if forecast is None or forecast.at - forecast.spread - now > lead:
            return None
        return forecast
