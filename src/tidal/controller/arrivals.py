"""What arrives at a vertex, as ``policy: tidal`` reads it: samples of the runtime's counts,
filtered, and the rates and backlog sized on (:class:`Arrivals`).

The runtime reports cumulative counts each tick: messages arrived at the vertex, arrived at the
sources upstream, pending upstream. Rates are their differences over a window, and on Spark a
window can lie: a query restarting for a replica change reports the same counts for seconds and
then all at once, or none at all. This module keeps the samples and says which ticks measured
something (:meth:`Arrivals.measured`), so the policy (:mod:`tidal.controller.adaptive`) sizes
on rates that span a stall instead of reading it as a quiet spell followed by a burst.
"""

from __future__ import annotations

from collections import deque

from tidal.controller.policy import PolicyInput

__all__ = ["SELECTIVITY_AFTER_BATCHES", "Arrivals"]

# Micro-batches out of the sources before their selectivity here is learnt. On Spark a batch's
# output reaches the buffer downstream before the batch commits upstream, so a vertex can see
# up to a batch per upstream replica more than has left the sources: after 1,500 messages, the
# sink of a 1:1 map read a selectivity of 2.00 and sized for twice the arrivals (`tidal bench
# policies`: 3 replicas where 2 kept up). After 20 batches, that is a few per cent.
SELECTIVITY_AFTER_BATCHES = 20

# (now, arrived here, arrived at the sources upstream, pending upstream, and when the two counts
# of arrivals were true: ``now`` less their ages, as a source's count is as of its last report)
Sample = tuple[float, float, float | None, float, float, float]


class Arrivals:
    """A vertex's arrival samples over the last ``keep_seconds``, and what they say.

    ``frozen_seconds``: how long counts identical to the last sample while messages wait are
    taken for a stall and left out (the policy's down window).
    """

    def __init__(self, keep_seconds: float, frozen_seconds: float, tick_seconds: float = 1.0) -> None:
        self.keep = keep_seconds
        self.frozen_for = frozen_seconds
        self.tick = tick_seconds
        self.samples: deque[Sample] = deque()
        self.selectivity = 1.0  # messages here per message arriving at the sources, learnt
        self._moved_at = 0.0  # when the counts last changed
        self._sources_moved_at = 0.0  # when the sources' counts (arrived, pending upstream) last changed
        self._origin: tuple[float, float, float] | None = None  # arrived here, at the sources, upstream

    def observe(self, view: PolicyInput) -> None:
        """Take this tick's counts, unless they are a stall's; forget what is older than the window."""
        if view.arrived is not None:
            here_at, sources_at = view.now - view.arrived_age, view.now - view.upstream_age
            sample = (
                view.now,
                view.arrived,
                view.upstream_arrived,
                view.upstream_pending,
                here_at,
                sources_at,
            )
            if self.samples and sample[2:4] != self.samples[-1][2:4]:
                self._sources_moved_at = view.now
            if not (self.samples and self._frozen(sample, view)):
                self.samples.append(sample)
        while self.samples and self.samples[0][0] < view.now - self.keep - 1:
            self.samples.popleft()

    def rates(self, now: float, window: float) -> tuple[float, float | None]:
        """Arrivals per second here and at the sources upstream over the last ``window`` seconds,
        each count over the time between when it was true at the window's ends: a source's
        report can be seconds older than the tick that reads it (its reader reports only when
        it plans a micro-batch), and over the tick's second, the first report after a 2 s
        batch read 2,491/s arriving where 900/s did (the cluster's waves, 2026-11-29).

        The window starts at the last sample kept at or before its start (else the first): a
        tick left out as frozen widens it to span the stall. Started at the first sample inside
        it, a one-second window after a left-out tick held only the tick's own sample and read
        0/s: on the cluster's bursts `orders` went 80,072 → 85,031 arrived over the two seconds
        around a frozen tick, the reading said 0/s, measured, and `enrich` never saw that burst
        rise (2026-11-30)."""
        start = now - window + 1e-9
        then = None
        for sample in self.samples:
            if sample[0] > start and then is not None:
                break
            then = sample
        last = self.samples[-1] if self.samples else None
        if then is None or last is None or now <= then[0]:
            return 0.0, None
        ages = now - last[0]  # samples left out since the last: the window runs on to now
        here = _per_second(last[1] - then[1], last[4] + ages - then[4])
        if last[2] is None or then[2] is None:
            return here, None
        return here, _per_second(last[2] - then[2], last[5] + ages - then[5])

    def demand(self, view: PolicyInput, fast: float, slow: float) -> tuple[float, float, float, str]:
        """``(arrivals/s, the last ``fast`` window's, backlog, what they are)``, the larger of the
        ``fast`` and ``slow`` windows' rates. Downstream of a source, a vertex sizes for what its
        sources take in (× the selectivity learnt between them and it) and for everything pending
        upstream that will come its way: a drained upstream's catch-up is not new load."""
        here_fast, sources_fast = self.rates(view.now, fast)
        here_slow, sources_slow = self.rates(view.now, slow)
        own = max(0.0, view.pending_now or 0.0)
        if sources_fast is None or sources_slow is None:
            return max(here_fast, here_slow), here_fast, own, "arriving"
        self._learn_selectivity(view.read_batch_size)
        upstream = view.upstream_pending * self.selectivity
        arriving = max(sources_fast, sources_slow) * self.selectivity
        now = sources_fast * self.selectivity
        return arriving, now, own + upstream, f"arriving at the sources (× {self.selectivity:.2f})"

    def _learn_selectivity(self, read_batch_size: int) -> None:
        last = self.samples[-1]
        if last[2] is None:
            return
        if self._origin is None:
            self._origin = (last[1], last[2], last[3])
        # What left the sources for here (arrived there, less what is still upstream) against
        # what arrived here, over everything since the first look: a catch-up upstream moves
        # both sides together, and a window of a few seconds at a wave's start (when most of
        # what left the sources is still upstream) gave 2.5 for a map (seen on Spark).
        here, there, held = self._origin
        left = (last[2] - there) - (last[3] - held)
        if left >= SELECTIVITY_AFTER_BATCHES * read_batch_size and last[1] > here:
            self.selectivity = (last[1] - here) / left

    def _frozen(self, sample: Sample, view: PolicyInput) -> bool:
        """Are this tick's counts exactly the last sample's while messages wait? On Spark a query
        restarting for a replica change reports the same pending and processed for seconds
        (``tidal bench peers``, the step: 4 s at 193 pending), then all at once: read as samples,
        that was 0/s and then 3,433/s arriving where 900/s did, and the floor a scale-down goes
        to fell to 1 in the middle of the step. Left out, the rates span the stall. Frozen for
        longer than ``frozen_seconds``, they are what happens (an upstream that delivers in
        chunks, a sink that waits for the next), and count again."""
        last = self.samples[-1]
        waiting = (view.pending_now or 0.0) > 0 or view.upstream_pending > 0
        if sample[1:4] != last[1:4]:
            self._moved_at = sample[0]
            return False
        return waiting and sample[0] - self._moved_at <= self.frozen_for

    def measured(self, view: PolicyInput, panic: float) -> bool:
        """Was this tick's arrival rate measured, not read as 0 for want of samples? On Spark a
        query restarting for a replica change reports no pending for several seconds: read as
        "nothing arrives", the first wave on a cluster rose twice, 18 s apart, and a period of
        18 s never agreed with the next one (``tidal bench peers``, the waves, 540 s)."""
        if len(self.samples) < 2 or self.samples[-1][0] != view.now:
            return False
        before, last = self.samples[-2], self.samples[-1]
        if last[0] - before[0] > panic + self.tick + 1e-9:
            return False  # a gap: the window's rate spans it
        if self._origin is None:  # sized on its own arrivals (a source, or no sources' counts)
            return True
        if last[2] is None or before[2] is None:  # on the sources': both known
            return False
        # Nor with the sources' counts frozen while messages wait upstream, for up to the down
        # window, as the vertex's own: a source's query restarting for a replica change reports
        # nothing, and this vertex, still draining what it had, moves on its own. Read as
        # measured, the cluster's step noted at most 286/s arriving lately at `enrich` in the
        # middle of 900/s while `orders` went 1 → 2: a floor a scale-down could go to.
        frozen = last[2:4] == before[2:4] and last[3] > 0
        return not (frozen and last[0] - self._sources_moved_at <= self.frozen_for)


def _per_second(count: float, seconds: float) -> float:
    """``count`` over ``seconds``, 0 for none (one report read twice has no span)."""
    return max(0.0, count / seconds) if seconds > 1e-9 else 0.0
