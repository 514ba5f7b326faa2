"""``policy: tidal`` — Tidal's own policy, built from the anchors' best ideas and told nothing.

Numaflow's rules scale by steps of two behind cooldowns and size on the rate the vertex managed,
so a vertex that cannot keep up looks like one with little traffic; the KPA sizes on arrivals
but must be told what a replica can do. This policy learns what it needs from what the runtime
measures, each tick:

* **Capacity per replica** — what a replica *sustains* in micro-batches, learnt from busy time,
  from throughput while saturated and from what a replica was seen to do
  (:class:`~tidal.controller.replica_capacity.ReplicaCapacity`, whose docstring says how).
* **Demand** — the arrival rate (``arrived`` = processed + pending) over a short window (a burst
  shows within ``panic_seconds``, KPA's panic idea) and a long one; the larger is used. The
  samples, and which ticks measured something, are :class:`~tidal.controller.arrivals.Arrivals`'.
* **Catch-up** — the backlog is drained within ``catch_up_seconds``: ``need = (arrivals +
  backlog / catch-up) / capacity / utilization``, rounded up, within ``scale.min``/``max``.
* **A step settles in one decision** (issue #61, :mod:`tidal.controller.settle`) — once the
  vertex has drained since it last started or idled, a rise's backlog drains within
  ``settle_seconds`` (45 s) through the headroom of the count the new load needs, checked, not
  trusted; a start still catches up in ``catch_up_seconds``. ``settle_seconds=None`` (Spark
  local mode, whose replicas share the driver's cores) drains every backlog by replicas.
* **A floor is not a capacity** — sized on what a replica was seen to do (busy time said
  less), a vertex whose own pending stays under what its replicas admit in a micro-batch
  keeps up and holds: unsaturated, its replicas did what arrived, so more replicas would each
  do less and confirm the count. It scales up once its input outgrows a micro-batch.
* **Down slowly, and once** — a scale-down goes only to the largest recommendation of the
  last ``down_window_seconds`` (Flink's FLINK-36018), so a dip does not release what the next
  second needs; not while the window's recent half recommends less (the load is still
  falling), and not by less than ``down_band`` (10 %) of the replicas (a trim).
* **Zero** — an idle vertex (nothing arriving, nothing pending) keeps its replicas while that is
  cheaper than a restart (three of its learnt start-ups), then goes to zero
  (:mod:`tidal.controller.quiet`, which also holds a vertex whose pending is not known, as
  Numaflow does, and lets a source at 0 peek); at zero, the first
  message wakes it at once to what its arrivals need (the activator), and the vertices
  downstream wake with it (``wake_for_path``), so their start-ups overlap.
* **Path-wide demand** — downstream of a source, a vertex sizes for the sources' arrivals (×
  the selectivity learnt between them) plus everything pending upstream: a drained upstream's
  catch-up burst is not new load, and the replicas for it are asked for before it arrives.
  That comes no faster than the feeding vertices deliver at their ``max`` (``upstream_limit``),
  so downstream of a capped vertex the demand is capped too.
* **Start-up** — learnt from how long asked-for replicas took to become ready; the backlog is
  projected to that moment, so the count is asked for once, not again every tick it grows; and
  after any change, until a start-up after the restarted query's first work, its backlog is no
  stall (:class:`~tidal.controller.startups.StartUps`).
* **Paced starts** (``starts_per_tick``, local mode) — at most that many new replicas a tick,
  the rest on the following ticks. In Spark local mode every new replica starts a Python
  worker on the driver's machine (1–2 s of CPU each); asked for nine at once on 2 cores
  (``orders`` 1 → 3, ``enrich`` 1 → 6, ``archive`` 1 → 3), ``enrich`` processed 500 orders in
  the next 13 s where Numaflow's 1 → 2 → 4 processed 6,500 (``tidal bench policies``, a
  1,800/s wave). The runtime passes the machine's cores in local mode and nothing on a cluster,
  whose executors start on their own cores; the simulator, which charges no CPU for a start,
  asks for everything at once.
* **Ahead of a periodic load** (:mod:`tidal.controller.ahead`) — the arrivals' rises are learnt
  (:class:`~tidal.scaling.periodic.RiseWatch`); once the load has risen twice, the fewest
  replicas that clear the next rise within half the catch-up of its end are asked for a
  start-up (plus a tick) before it is due, and kept while the next rise would ask for them
  again within a start-up of their going. Once two periods agree, an idle vertex goes to
  ``scale.min`` after a quiet spell when the next rise is further than that. A rise that does
  not come is a miss: the replicas go as any idle ones do. The demo's waves on a cluster: an
  executor asked for 11-21 s before it runs a task, so each wave found its vertices a start-up
  short; Numaflow, Knative and Spark's dynamic allocation all react to the rise instead.
* **A rise that ends before a scale-up pays** — once two rises agree on how long their high
  phase lasts (:meth:`~tidal.scaling.periodic.RiseWatch.rise_ends`), a rise under way whose
  backlog the ready replicas clear within ``catch_up_seconds`` of its end is held through,
  and the next is not pre-scaled for: on the cluster each 5 s burst took `orders` 1 → 2 → 1,
  two restarts of the source for a burst one replica absorbs 2 s after it ends. A rise that
  outlasts the learnt length by its tolerance (or 2 s) is a load that stays, and is scaled for.
* **Back pressure** — no scale-up while a buffer downstream is over its limit (more replicas
  would only fill it faster), as in Numaflow.
* **Futile scale-ups** — none while a rate limit holds the reads back or the sink is failing
  (:mod:`tidal.controller.futile`), as Numaflow's rules hold them.

Every decision says what fired it, e.g. ``1450/s arriving, 180/s per replica (busy time),
backlog 6000 drains in 10 s → 10``. Defaults were chosen in the simulator
(``tidal bench decisions``); the constants are arguments so a pipeline can tune them.
"""

from __future__ import annotations

import math

from tidal.controller.ahead import RisesAhead
from tidal.controller.arrivals import Arrivals
from tidal.controller.futile import FutileScaleUp
from tidal.controller.policy import PolicyInput, VertexPolicy
from tidal.controller.quiet import Verdict, when_idle, when_unknown
from tidal.controller.replica_capacity import ReplicaCapacity
from tidal.controller.settle import SLACK, CatchUp, DownWindow
from tidal.controller.startups import StartUps
from tidal.scaling import Decision, NumaflowScale, Pressure, Rule
from tidal.scaling.periodic import RiseWatch

__all__ = ["AdaptivePolicy"]


class AdaptivePolicy(VertexPolicy):
    name = "tidal"

    def __init__(
        self,
        scale: NumaflowScale,
        *,
        utilization: float = 0.95,
        catch_up_seconds: float = 10.0,
        settle_seconds: float | None = 45.0,
        down_band: float = 0.1,
        panic_seconds: float = 1.0,
        stable_seconds: float = 30.0,
        down_window_seconds: float = 30.0,
        startup_guess_seconds: float = 5.0,
        batch_guess_seconds: float = 0.25,
        starts_per_tick: int | None = None,
        learning: float = 0.1,
        predict: bool = True,
        tick_seconds: float = 1.0,
    ) -> None:
        self.scale = scale
        self.utilization = utilization
        self.horizon = CatchUp(catch_up_seconds, settle_seconds)  # None: always by replicas
        self.down_band = down_band
        self.panic = panic_seconds
        self.stable = stable_seconds
        self.down_window = down_window_seconds
        self.startups = StartUps(startup_guess_seconds)
        self.starts_per_tick = starts_per_tick  # None: every replica asked for at once
        self.learnt = ReplicaCapacity(batch_guess_seconds, learning)
        self.arrivals = Arrivals(stable_seconds, down_window_seconds, tick_seconds)
        self._steady = DownWindow()  # what arrivals alone needed, recently
        self._idle_since: float | None = None
        self._woken = False  # from 0, and its replicas still starting (StartUps.restarting)
        self.ahead = RisesAhead(tick_seconds, catch_up_seconds) if predict else None
        self.tick = tick_seconds
        self.futile = FutileScaleUp(scale.lookback_seconds)  # a rate limit or a failing sink

    @property
    def rises(self) -> RiseWatch | None:
        """The rises of the arrivals, as learnt so far; ``None`` if not predicting."""
        return None if self.ahead is None else self.ahead.watch

    # -- learning ------------------------------------------------------------------------------

    def _learn(self, view: PolicyInput) -> None:
        self.startups.learn(view)
        self.learnt.observe(view)

    @property
    def startup(self) -> float:
        """Seconds a replica takes to start, as learnt so far."""
        return self.startups.seconds

    @property
    def capacity(self) -> float | None:
        """Messages/s one replica sustains in micro-batches, as learnt so far."""
        return self.learnt.capacity

    @property
    def source(self) -> str:
        """Where :attr:`capacity` comes from, for the decisions' reasons."""
        return self.learnt.source

    def most_delivered(self) -> float | None:
        """The most this vertex processes a second: its ``max`` × what a replica sustains."""
        capacity = self.capacity
        if capacity is None:
            return None
        return self.scale.max * capacity

    @property
    def selectivity(self) -> float:
        """Messages here per message arriving at the sources, as learnt so far."""
        return self.arrivals.selectivity

    # -- deciding ------------------------------------------------------------------------------

    def decide(self, view: PolicyInput) -> Decision:
        self._learn(view)
        self.futile.record(view)
        self.arrivals.observe(view)
        arriving, lately, backlog, what = self.arrivals.demand(view, self.panic, self.stable)
        current, low, high = view.replicas, self.scale.min, self.scale.max
        if self._idle_since is not None or current == 0:
            self.horizon.started()  # what comes now is a start, not a rise under load

        if self.scale.disabled:
            return self._hold(view, Rule.DISABLED, "scale.disabled")
        if view.pending_now is None:
            return self._apply(view, when_unknown(view, self.scale))
        pre_scale = self._ahead(view, lately, backlog)
        if pre_scale is not None:
            return pre_scale
        if lately == 0 and backlog == 0:  # nothing in the last panic window, nothing waiting
            return self._idle(view, low)
        self._idle_since = None
        capacity = self.capacity
        if capacity is None:
            if current == 0 and (backlog > 0 or arriving > 0):
                return self._move(
                    view, max(1, low), Rule.WAKE_ON_PENDING, "messages arrived at 0: wake to learn"
                )
            return self._hold(view, Rule.WARMING_UP, "no processing measured yet: capacity unknown")

        per_replica = capacity * self.utilization
        # A start (from 0 or idle) drains in catch_up seconds, a rise under load in settle
        # seconds through the headroom of the count the new load needs (tidal.controller.settle).
        restarting = self.startups.restarting(view)
        catch_up = self.horizon.horizon(
            view.now, backlog, arriving, self.startup, self.tick, starting=restarting
        )
        # What the arrivals of the last panic window alone need: the floor a scale-down goes to is
        # the most of these over the down window (the long average decays too slowly to use).
        steady = min(high, max(low, math.ceil(lately / per_replica - 1e-9)))
        if self.rises is not None:
            self.rises.note_needed(steady)
        # The backlog when the replicas asked for now would be ready, drained in catch_up seconds.
        starting, until_ready = self.startups.starting(view), self.startups.until_ready(view)
        shortfall = max(0.0, arriving - view.ready * capacity)
        projected = backlog + shortfall * until_ready
        rate = arriving + projected / catch_up
        bound = ""
        if view.upstream_limit is not None:
            # Downstream of a vertex at its max, the backlog upstream comes no faster than that
            # vertex delivers: sized for all of it, the demo's sink went to 3 replicas behind an
            # `enrich` at 6 that delivered ~1,700/s (Numaflow kept it at 1, and it kept up).
            inflow = view.upstream_limit * self.selectivity + max(0.0, view.pending_now or 0.0) / catch_up
            if inflow < rate:
                rate, bound = inflow, f", at most {inflow:.0f}/s from upstream at its max"
        wanted = min(high, max(low, math.ceil(rate / per_replica - 1e-9)))
        # No more than the fewest replicas the hold below accepts: at full speed they drain the
        # backlog within SLACK × catch-up. Asked for more, the extra ones drain it a few seconds
        # sooner and are then stepped down again: a start and a stop more for every vertex on the
        # path (in the simulator: bursty 1.30× the oracle instead of 1.34×, 81 actions, not 96).
        slack = SLACK * catch_up
        enough = max(low, steady, math.ceil((arriving + projected / slack) / capacity - 1e-9))
        if enough < wanted:
            wanted, bound = enough, f"{bound}, {enough} drain it in {slack:g} s at full speed"
        explain = (
            f"{arriving:.0f}/s {what}, {capacity:.0f}/s per replica ({self.source}), "
            f"backlog {backlog:.0f} here and upstream ({projected:.0f} when ready in {until_ready:.0f} s) "
            f"drains in {catch_up:g} s{bound} → {wanted}"
        )
        if current == 0:
            return self._up(view, max(1, wanted), Rule.WAKE_ON_PENDING, f"at 0: {explain}")
        measured = self.arrivals.measured(view, self.panic)
        if measured:  # a rate read across a stall is no floor
            self._steady.note(view.now, steady, self.down_window)
        surplus = current * capacity - arriving
        if wanted > current and surplus > 0 and projected <= surplus * slack:
            # The replicas there keep up and drain the backlog about in time: one more would be
            # the noise of the estimates (a real rise builds a backlog, which then asks for it).
            drains = projected / surplus
            return self._hold(view, Rule.STEADY, f"{explain}; {current} drain it in {drains:.0f} s: enough")
        own, admits = max(0.0, view.pending_now or 0.0), view.ready * view.read_batch_size
        # Woken from 0 and still starting, with more than a micro-batch waiting upstream, its
        # input is on its way: held on its empty buffer, the cluster's `enrich` stayed at 1 for
        # 5 s of a wave with 1,167 orders at its restarting source and 900/s arriving
        # (2026-12-07). Not after a scale-down's restart: there it did keep up.
        self._woken = self._woken and restarting
        idle_input = own < admits and not (self._woken and backlog - own >= admits)
        if wanted > current and self.learnt.only_a_floor and view.ready == current and idle_input:
            # What a replica did is a floor, not a capacity: unsaturated, the replicas did what
            # arrived. Sized on it, a vertex that keeps up asks for more replicas, each then does
            # less, and that confirms the count (the bench's sink: 3 replicas at 800/s each where
            # one keeps up with 1,800/s). So it scales up only once its own input outgrows what
            # its replicas admit in a micro-batch: there it is saturated and learns its capacity.
            reason = f"{explain}; keeps up: {own:.0f} pending, under a micro-batch of its {current}"
            return self._hold(view, Rule.STEADY, reason)
        spare = current * capacity - lately  # what the replicas there do over the arrivals lately
        if (
            wanted > current
            and steady <= current
            and view.ready == current
            and (backlog < admits or backlog <= spare * slack)
        ):
            # The arrivals lately need no more than these, and what waits fits a micro-batch or
            # drains through their spare capacity within the slack: what asks for more is the
            # slow window's rate, the load that has passed. Scaled up on it, the vertex went
            # down again (the cluster's spike as it ended: 4 → 1 → 3 → 1 → 3 …, eleven changes
            # in 13 s; its step: 3 → 1 → 2 → 1 on the 619 its restart piled up, 2026-11-29).
            reason = f"{explain}; keeps up: arrivals lately need {steady}, {backlog:.0f} waiting"
            if backlog >= admits:
                reason += f" drain in {backlog / spare:.0f} s at {spare:.0f}/s spare"
            return self._hold(view, Rule.STEADY, reason)
        ends = None if self.rises is None else self.rises.rise_ends(view.now)
        clears = math.inf if ends is None else ends.clears(backlog, view.ready * capacity, arriving)
        if wanted > current and ends is not None and clears <= ends.left + self.horizon.catch_up:
            # A rise that ends before a scale-up pays (see the module docstring).
            reason = f"{explain}; {ends.reason()}: {view.ready} clear it in {clears:.0f} s"
            return self._hold(view, Rule.RISE_ENDS, reason)
        if wanted > current:
            if view.pressure.level != Pressure.NONE:
                return self._hold(view, Rule.BACK_PRESSURE_DOWNSTREAM, f"{explain}; {view.pressure.reason}")
            return self._up(view, wanted, Rule.SCALE_UP, explain)
        peak, recent = self._steady.peak(), self._steady.recent(view.now, self.down_window)
        over = None if self.rises is None else self.rises.over_since(view.now)
        if over is not None:
            # A forecast rise whose load has fallen for as long as a rise needs before it: what
            # it needed is no floor for the quiet spell. Held for the whole down window, the
            # cluster's bursts kept `enrich` at 6 for 8–9 s after each had drained, then asked
            # for 6 again 2–3 s later for the next (2026-11-30).
            peak = self._steady.since(over)
        # Not to 0 with messages waiting: the sources' quiet took the bench's sink from 3 to 0
        # with 1,500 waiting, and back to 2 a second later.
        least = 1 if backlog > 0 else 0
        # Not down before a rise that would ask for them again within a start-up of their going:
        # the horizon an idle vertex keeps its replicas for (_idle).
        ahead = self.ahead
        kept = None if ahead is None else ahead.kept(view.now, self.startup, backlog, lately, per_replica)
        if kept is not None and max(peak, least) < current:  # asked for ahead of a rise: not down before it
            rise, enough, clear = kept
            least = max(least, min(current, enough))
            if least == current:
                return self._hold(view, Rule.STEADY, f"{explain}; kept: {rise.reason(view.now)}{clear}")
        floor = max(peak, least)
        drained = backlog <= arriving
        if starting and not (drained and floor <= view.ready):
            # Replicas still starting are waited for, unless the ready ones are enough: on a
            # cluster a replica with no free core never becomes ready, and waiting for it held
            # `enrich` at 6 through a whole ×4 step where 4 kept up (`tidal bench peers`, step).
            return self._hold(view, Rule.NOT_READY, f"{explain}; {view.replicas - view.ready} still starting")
        if not (floor < current and drained):
            return self._hold(view, Rule.STEADY, explain)
        # Drained: size for arrivals, the most recently, in one decision. Not while the counts
        # are frozen; nor while the window still remembers a higher load than its recent half,
        # the floor still falling (a step down at 325 s went 10 → 9, then → 5 six seconds
        # later); nor for a trim of under ``down_band`` (a ×10 step settled at 15, then went to
        # 14 a hundred seconds later as the capacity firmed up).
        if not measured:
            return self._hold(view, Rule.STEADY, f"{explain}; counts not moving: down once they are")
        if max(recent, least) < floor:
            window = f"{floor} over {self.down_window:g} s"
            reason = f"{explain}; falling: {recent} lately, {window}: down once level"
            return self._hold(view, Rule.STEADY, reason)
        if floor > 0 and current - floor < self.down_band * current:
            reason = f"{explain}; {floor} would do, within {self.down_band:.0%} of {current}: kept"
            return self._hold(view, Rule.STEADY, reason)
        window = (
            f"in {self.down_window:g} s"
            if over is None
            else f"since the rise's load fell {view.now - over:.0f} s ago"
        )
        reason = f"{explain}; drained, arrivals needed at most {floor} {window}"
        return self._move(view, floor, Rule.SCALE_DOWN, reason)

    def _idle(self, view: PolicyInput, low: int) -> Decision:
        """Nothing arriving, nothing pending: :func:`tidal.controller.quiet.when_idle`."""
        self._idle_since = self._idle_since if self._idle_since is not None else view.now
        return self._apply(view, when_idle(view, low, view.now - self._idle_since, self.startup, self.ahead))

    def _apply(self, view: PolicyInput, verdict: Verdict) -> Decision:
        if verdict.to is None:
            return self._hold(view, verdict.rule, verdict.reason)
        if verdict.to > view.replicas:
            return self._up(view, verdict.to, verdict.rule, verdict.reason)
        return self._move(view, verdict.to, verdict.rule, verdict.reason)

    def _ahead(self, view: PolicyInput, lately: float, backlog: float) -> Decision | None:
        """Learn the rises, and ask for the next one's replicas a start-up before it is due
        (:mod:`tidal.controller.ahead`)."""
        if self.ahead is None:
            return None
        if self.arrivals.measured(view, self.panic):
            self.ahead.observe(view.now, lately, backlog, view.read_batch_size)
        # Planned at the utilisation every other count is sized at: at the full rate learnt
        # (419/s), 2 of the cluster's `enrich` were to clear a wave 3 s after it, did 370/s each
        # and went 2 → 4 mid-wave, a third executor for 25 s (2026-12-07).
        per_replica = (self.capacity or 0.0) * self.utilization
        asked = self.ahead.pre_scale(
            view.now, lately, backlog, view.replicas, per_replica, self.startup, self.scale
        )
        if asked is None:
            return None
        wanted, reason, due_at = asked
        decision = self._up(view, wanted, Rule.PRE_SCALE, reason)
        if not decision.changed:
            return decision
        # When the rise is due: its replicas count as working until then (controller.state.scaled)
        return decision.replace(inputs={**decision.inputs, "rise_due_at": round(due_at, 3)})

    def wake_for_path(self, view: PolicyInput, woken: str) -> Decision | None:
        """At 0 when ``woken``, upstream, just woke: wake now, so the start-ups overlap."""
        if view.replicas > 0 or self.scale.disabled:
            return None
        return self._up(view, max(1, self.scale.min), Rule.WAKE_ON_PATH, f"{woken} upstream woke: start now")

    def _up(self, view: PolicyInput, to: int, rule: Rule, reason: str) -> Decision:
        self._idle_since = None
        allowed = max(view.replicas, self.scale.min, 1)  # a wake and the min are never futile
        futile = None if to <= allowed else self.futile.why(view, to)
        if futile is not None:  # as Numaflow's guards: to the min at most, else held
            held, why = futile
            if allowed == view.replicas:
                return self._hold(view, held, f"{reason}; {why}")
            to, rule, reason = allowed, held, f"{reason}; {why}"
        paced = None if self.starts_per_tick is None else view.replicas + max(1, self.starts_per_tick)
        if paced is not None and to > paced:  # the rest on the next ticks, while these start
            reason, to = f"{reason}, {paced} this tick ({self.starts_per_tick} starts a tick)", paced
        if to > view.ready:  # asked again while replicas start: see StartUps.until_ready
            self.startups.asked(view, to)
        return self._move(view, to, rule, reason)

    def _move(self, view: PolicyInput, to: int, rule: Rule, reason: str) -> Decision:
        if to == view.replicas:
            return self._hold(view, Rule.STEADY, reason)
        self.startups.changed(view, to)
        self._woken = view.replicas == 0  # woken from 0: its input is still on its way
        return Decision(
            view.name, view.now, view.replicas, to, rule, reason, self._inputs(view), recommended=to
        )

    def _hold(self, view: PolicyInput, rule: Rule, reason: str) -> Decision:
        return Decision(view.name, view.now, view.replicas, view.replicas, rule, reason, self._inputs(view))

    def _inputs(self, view: PolicyInput) -> dict[str, float | int | str | None]:
        learnt = self.learnt.inputs()
        out = {**learnt, "pending": view.pending_now, "ready": view.ready, "replicas": view.replicas}
        if view.attainable is not None:  # on a cluster: the most it can have within the executor bounds
            out["attainable"] = view.attainable
        out["startup"] = round(self.startups.seconds, 2)  # as learnt: what a pre-scale leads by
        return out
