"""``policy: tidal`` — Tidal's own policy, built from the anchors' best ideas and told nothing.

Numaflow's rules scale by steps of two behind cooldowns and size on the rate the vertex managed,
so a vertex that cannot keep up looks like one with little traffic; the KPA sizes on arrivals
but must be told what a replica can do. This policy learns what it needs from what the runtime
measures, each tick:

* **Capacity per replica** — from busy time (messages processed per replica-second of work, an
  average that forgets with every sample); without busy time, from the throughput per ready
  replica in ticks when the vertex was saturated (its input was not drained).
* **Demand** — the arrival rate (``arrived`` = processed + pending) over a short window (a burst
  shows within ``panic_seconds``, KPA's panic idea) and a long one; the larger is used.
* **Catch-up** — the backlog is drained within ``catch_up_seconds``: ``need = (arrivals +
  backlog / catch-up) / capacity / utilization``, rounded up, within ``scale.min``/``max``.
  No scale-up while the replicas there keep up and drain the backlog within 1.5 × catch-up
  (the rest is the noise of the estimates).
* **Down slowly** — a scale-down goes only to the largest recommendation of the last
  ``down_window_seconds`` (Flink's FLINK-36018), so a dip does not release what the next
  second needs.
* **Zero** — an idle vertex (nothing arriving, nothing pending) keeps its replicas while that is
  cheaper than a restart (three of its learnt start-ups), then goes to zero; at zero, the first
  message wakes it at once to what its arrivals need (the activator), and the vertices
  downstream wake with it (``wake_for_path``), so their start-ups overlap.
* **Path-wide demand** — downstream of a source, a vertex sizes for the sources' arrivals (×
  the selectivity learnt between them) plus everything pending upstream: a drained upstream's
  catch-up burst is not new load, and the replicas for it are asked for before it arrives.
* **Start-up** — learnt from how long asked-for replicas took to become ready; the backlog is
  projected to that moment, so the count is asked for once, not again every tick it grows.
* **Back pressure** — no scale-up while a buffer downstream is over its limit (more replicas
  would only fill it faster), as in Numaflow.

Every decision says what fired it, e.g. ``1450/s arriving, 180/s per replica (busy time),
backlog 6000 drains in 10 s → 10``. Defaults were chosen in the simulator
(``tidal bench decisions``); the constants are arguments so a pipeline can tune them.
"""

from __future__ import annotations

import math
from collections import deque

from tidal.controller.policy import PolicyInput, VertexPolicy
from tidal.scaling import Decision, NumaflowScale, Pressure, Rule

__all__ = ["AdaptivePolicy"]


class AdaptivePolicy(VertexPolicy):
    name = "tidal"

    def __init__(
        self,
        scale: NumaflowScale,
        *,
        utilization: float = 0.95,
        catch_up_seconds: float = 10.0,
        panic_seconds: float = 1.0,
        stable_seconds: float = 30.0,
        down_window_seconds: float = 30.0,
        startup_guess_seconds: float = 5.0,
        learning: float = 0.1,
    ) -> None:
        self.scale = scale
        self.utilization = utilization
        self.catch_up = catch_up_seconds
        self.panic = panic_seconds
        self.stable = stable_seconds
        self.down_window = down_window_seconds
        self.startup = startup_guess_seconds  # until a start-up is observed
        self.learning = learning
        self.capacity: float | None = None  # messages/s one replica processes, learnt
        self.source = "nothing yet"
        # (now, arrived here, arrived at the sources upstream, pending upstream)
        self._samples: deque[tuple[float, float, float | None, float]] = deque()
        self.selectivity = 1.0  # messages here per message arriving at the sources, learnt
        self._last: tuple[float, float, float | None, int] | None = None  # now, processed, busy, ready
        self._steady: deque[tuple[float, int]] = deque()  # what arrivals alone needed, recently
        self._idle_since: float | None = None
        self._asked: tuple[float, int] | None = None  # (when, replicas): a scale-up not ready yet

    # -- learning ------------------------------------------------------------------------------

    def _learn(self, view: PolicyInput) -> None:
        if self._asked is not None and view.ready >= self._asked[1]:
            took = view.now - self._asked[0]
            self.startup += 0.5 * (took - self.startup)  # few observations: learn them fast
            self._asked = None
        last = self._last
        self._last = (view.now, view.processed, view.busy_seconds, view.ready)
        if last is None or view.now <= last[0]:
            return
        done = view.processed - last[1]
        if view.busy_seconds is not None and last[2] is not None:
            busy = view.busy_seconds - last[2]
            if busy > 0.05 and done > 0:
                self._update(done / busy, "busy time")
            return
        saturated = (view.pending_now or 0) > view.read_batch_size and last[3] > 0
        if saturated and done > 0:
            self._update(done / (view.now - last[0]) / last[3], "throughput while saturated")

    def _update(self, observed: float, source: str) -> None:
        if self.capacity is None:
            self.capacity = observed
        else:
            self.capacity += self.learning * (observed - self.capacity)
        self.source = source

    def _rates(self, view: PolicyInput, window: float) -> tuple[float, float | None]:
        """Arrivals per second here and at the sources upstream over the last ``window`` seconds."""
        then = next((x for x in self._samples if x[0] >= view.now - window - 1e-9), None)
        last = self._samples[-1] if self._samples else None
        if then is None or last is None or view.now <= then[0]:
            return 0.0, None
        span = view.now - then[0]
        here = max(0.0, (last[1] - then[1]) / span)
        sources = None if last[2] is None or then[2] is None else max(0.0, (last[2] - then[2]) / span)
        return here, sources

    def _demand(self, view: PolicyInput) -> tuple[float, float, float, str]:
        """``(arrivals/s, the last panic window's, backlog, what they are)``. Downstream of a
        source, a vertex sizes for what its sources take in (× the selectivity learnt between
        them and it) and for everything pending upstream that will come its way: a drained
        upstream's catch-up is not new load."""
        here_fast, sources_fast = self._rates(view, self.panic)
        here_slow, sources_slow = self._rates(view, self.stable)
        own = max(0.0, view.pending_now or 0.0)
        if sources_fast is None or sources_slow is None:
            return max(here_fast, here_slow), here_fast, own, "arriving"
        first, last = self._samples[0], self._samples[-1]
        if first[2] is not None and last[2] is not None and first[0] <= view.now - self.stable / 2:
            # What left the sources for here (arrived there, less what is still upstream) against
            # what arrived here: a catch-up upstream moves both sides together.
            left = (last[2] - first[2]) - (last[3] - first[3])
            if left > 0 and last[1] > first[1]:
                self.selectivity = (last[1] - first[1]) / left
        upstream = view.upstream_pending * self.selectivity
        arriving = max(sources_fast, sources_slow) * self.selectivity
        now = sources_fast * self.selectivity
        return arriving, now, own + upstream, f"arriving at the sources (× {self.selectivity:.2f})"

    # -- deciding ------------------------------------------------------------------------------

    def decide(self, view: PolicyInput) -> Decision:
        self._learn(view)
        arrived = view.arrived
        if arrived is not None:
            self._samples.append((view.now, arrived, view.upstream_arrived, view.upstream_pending))
        while self._samples and self._samples[0][0] < view.now - self.stable - 1:
            self._samples.popleft()
        arriving, lately, backlog, what = self._demand(view)
        current, low, high = view.replicas, self.scale.min, self.scale.max

        if self.scale.disabled:
            return self._hold(view, Rule.DISABLED, "scale.disabled")
        if lately == 0 and backlog == 0:  # nothing in the last panic window, nothing waiting
            return self._idle(view, low)
        self._idle_since = None
        if self.capacity is None:
            if current == 0 and (backlog > 0 or arriving > 0):
                return self._move(
                    view, max(1, low), Rule.WAKE_ON_PENDING, "messages arrived at 0: wake to learn"
                )
            return self._hold(view, Rule.WARMING_UP, "no processing measured yet: capacity unknown")

        per_replica = self.capacity * self.utilization
        # What the arrivals of the last panic window alone need: the floor a scale-down goes to is
        # the most of these over the down window (the long average decays too slowly to use).
        steady = min(high, max(low, math.ceil(lately / per_replica - 1e-9)))
        # The backlog when the replicas asked for now would be ready, drained in catch_up seconds.
        starting = self._asked is not None and view.ready < view.replicas
        until_ready = (
            max(0.0, self._asked[0] + self.startup - view.now) if starting and self._asked else self.startup
        )
        short = max(0.0, arriving - view.ready * self.capacity)
        projected = backlog + short * until_ready
        wanted = min(high, max(low, math.ceil((arriving + projected / self.catch_up) / per_replica - 1e-9)))
        explain = (
            f"{arriving:.0f}/s {what}, {self.capacity:.0f}/s per replica ({self.source}), "
            f"backlog {backlog:.0f} here and upstream ({projected:.0f} when ready in {until_ready:.0f} s) "
            f"drains in {self.catch_up:g} s → {wanted}"
        )
        if current == 0:
            return self._up(view, max(1, wanted), Rule.WAKE_ON_PENDING, f"at 0: {explain}")
        self._steady.append((view.now, steady))
        while self._steady and self._steady[0][0] < view.now - self.down_window:
            self._steady.popleft()
        surplus = current * self.capacity - arriving
        if wanted > current and surplus > 0 and projected <= surplus * self.catch_up * 1.5:
            # The replicas there keep up and drain the backlog about in time: one more would be
            # the noise of the estimates (a real rise builds a backlog, which then asks for it).
            drains = projected / surplus
            return self._hold(view, Rule.STEADY, f"{explain}; {current} drain it in {drains:.0f} s: enough")
        if wanted > current:
            if view.pressure.level != Pressure.NONE:
                return self._hold(view, Rule.BACK_PRESSURE_DOWNSTREAM, f"{explain}; {view.pressure.reason}")
            return self._up(view, wanted, Rule.SCALE_UP, explain)
        if starting:
            return self._hold(view, Rule.NOT_READY, f"{explain}; {view.replicas - view.ready} still starting")
        floor = max(r for _, r in self._steady)
        if floor < current and backlog <= arriving:  # drained: size for arrivals, the most recently
            reason = f"{explain}; drained, arrivals needed at most {floor} in {self.down_window:g} s"
            return self._move(view, floor, Rule.SCALE_DOWN, reason)
        return self._hold(view, Rule.STEADY, explain)

    def _idle(self, view: PolicyInput, low: int) -> Decision:
        """Nothing arriving, nothing pending: keep the replicas while that costs less than
        starting them again, then go to ``scale.min``. Three start-ups: a restart costs one of
        replica-time and one of delay, and a gap that has lasted that long tends to go on (gaps
        between bursts are heavy-tailed); shorter keeps cost more restarts than they save."""
        self._idle_since = self._idle_since if self._idle_since is not None else view.now
        idle, keep = view.now - self._idle_since, 3 * self.startup
        if view.ready < view.replicas:  # woken ahead of its messages (the path): let them come
            return self._hold(view, Rule.NOT_READY, f"idle, {view.replicas - view.ready} starting")
        if view.replicas > low and idle >= keep:
            return self._move(
                view, low, Rule.SCALE_TO_ZERO, f"idle {idle:.0f} s, past three start-ups ({keep:.0f} s)"
            )
        return self._hold(view, Rule.STEADY, f"idle {idle:.0f} s (to {low} after {keep:.0f} s)")

    def wake_for_path(self, view: PolicyInput, woken: str) -> Decision | None:
        """At 0 when ``woken``, upstream, just woke: wake now, so the start-ups overlap."""
        if view.replicas > 0 or self.scale.disabled:
            return None
        return self._up(view, max(1, self.scale.min), Rule.WAKE_ON_PATH, f"{woken} upstream woke: start now")

    def _up(self, view: PolicyInput, to: int, rule: Rule, reason: str) -> Decision:
        self._idle_since = None
        if to > view.ready:
            self._asked = (view.now, to)
        return self._move(view, to, rule, reason)

    def _move(self, view: PolicyInput, to: int, rule: Rule, reason: str) -> Decision:
        if to == view.replicas:
            return self._hold(view, Rule.STEADY, reason)
        return Decision(
            view.name, view.now, view.replicas, to, rule, reason, self._inputs(view), recommended=to
        )

    def _hold(self, view: PolicyInput, rule: Rule, reason: str) -> Decision:
        return Decision(view.name, view.now, view.replicas, view.replicas, rule, reason, self._inputs(view))

    def _inputs(self, view: PolicyInput) -> dict[str, float | int | str | None]:
        return {
            "capacity": self.capacity,
            "learnt_from": self.source,
            "pending": view.pending_now,
            "ready": view.ready,
            "replicas": view.replicas,
        }
