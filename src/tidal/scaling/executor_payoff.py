"""Does one more executor pay? What each executor count delivered, and where to stop growing.

Every autoscaler Tidal follows assumes that capacity grows with what it adds: Numaflow sizes
replicas on a rate per replica, Knative pods on a concurrency per pod, and Spark's dynamic
allocation asks for an executor per ``tasksPerExecutor`` tasks waiting. On a real cluster the
next executor often adds little: the hosts are shared (on the benchmark's rig four 2-core
workers share one 2-core machine), a sink or a broker is the bottleneck, a stage is skewed onto
a few partitions. The executor is paid for all the same.

:class:`ExecutorPayoff` measures it. While executors are the limit (the replicas want every
registered executor, and the backlog would keep them busy for ``backlog_seconds`` more), it
adds up what the pipeline delivered at its last vertices for each count of registered
executors, from ``settle`` seconds after the count last changed (a new executor's first tasks
start its Python workers). The ``k + 1``-th executor *pays* when it raised the delivered rate
by at least ``payoff`` of what one executor delivered at ``k``: with ``payoff`` 0.25, the
second must add 25 %, the third 12.5 %, the fourth 8.3 % (``j - k`` more executors, as many
times that). The cap is the smallest ``k`` whose next measured count did not pay; the
allocator asks for no more than that, and the reason says what was measured ("a 3rd executor
added -42%: 108/s → 63/s delivered while executors were the limit; paying needs 12%").

What was measured is forgotten after ``memory`` seconds, so a cap is tried again: the load, the
cluster or the code may have changed, and a count that did not pay may pay now. A count is
judged only on ``min_seconds`` of measurement, so a few noisy micro-batches decide nothing.

Spark's dynamic allocation, Numaflow and Knative have no such rule; Tidal differs on purpose,
and ``cluster.executorPayoff: 0`` turns it off.

Pure: time and what was delivered are arguments; no Spark, no clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import pairwise

__all__ = ["ExecutorPayoff", "Payoff"]


def _ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, … 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True, slots=True)
class Payoff:
    """The cap (``None``: grow as the replicas need), and why."""

    cap: int | None
    reason: str = ""
    rates: tuple[tuple[int, float, float], ...] = ()  # (executors, delivered/s, seconds measured)


@dataclass(slots=True)
class _Span:
    """One stretch of measurement: ``seconds`` long, ``delivered`` messages, ending at ``at``."""

    at: float
    seconds: float
    delivered: float


class ExecutorPayoff:
    """What each executor count delivered while executors were the limit (module docstring)."""

    def __init__(
        self,
        payoff: float = 0.25,
        settle: float = 5.0,
        min_seconds: float = 8.0,
        memory: float = 600.0,
        backlog_seconds: float = 5.0,
    ) -> None:
        if min(payoff, settle, backlog_seconds) < 0 or min_seconds <= 0 or memory <= 0:
            raise ValueError("payoff, settle and backlog_seconds must be ≥ 0, min_seconds and memory > 0")
        self.payoff = payoff
        self.settle = settle
        self.min_seconds = min_seconds
        self.memory = memory
        self.backlog_seconds = backlog_seconds
        self._recent: float | None = None  # delivered/s, smoothed over the last looks
        self._spans: dict[int, deque[_Span]] = {}
        self._executors: int | None = None
        self._since = 0.0  # when the registered count became what it is
        self._last: tuple[float, float, bool] | None = None  # (at, delivered, limited) of the last look

    def observe(self, now: float, executors: int, delivered: float, pending: float, wants_all: bool) -> None:
        """One look: ``executors`` registered, ``delivered`` messages so far at the sinks (a
        cumulative count), ``pending`` messages waiting anywhere in the pipeline now, and
        ``wants_all`` when the replicas want at least the executors registered.

        Executors are *the limit* when they are all wanted and the backlog would keep them busy
        for ``backlog_seconds`` at the rate last delivered: near the end of a drain the
        micro-batches are small and the rate says how little is left, not what executors can do.
        A stretch between two looks counts when both ends were limited, at one count of
        executors, ``settle`` seconds or more after that count began."""
        if executors != self._executors:
            self._executors, self._since = executors, now
        last = self._last
        if last is not None and now > last[0]:
            recent = max(0.0, delivered - last[1]) / (now - last[0])
            self._recent = recent if self._recent is None else 0.8 * self._recent + 0.2 * recent
        limited = wants_all and pending > 0 and pending >= self.backlog_seconds * (self._recent or 0.0)
        self._last = (now, delivered, limited)
        if last is None or self.payoff == 0:
            return
        at, before, was_limited = last
        if not (limited and was_limited) or at < self._since + self.settle or now <= at:
            return
        spans = self._spans.setdefault(executors, deque())
        spans.append(_Span(now, now - at, max(0.0, delivered - before)))
        while spans and spans[0].at < now - self.memory:
            spans.popleft()

    def rate(self, now: float, executors: int) -> tuple[float, float] | None:
        """(delivered/s, seconds measured) at ``executors`` over the last ``memory`` seconds, or
        ``None`` with less than ``min_seconds`` of measurement."""
        spans = [s for s in self._spans.get(executors, ()) if s.at >= now - self.memory]
        seconds = sum(s.seconds for s in spans)
        if seconds < self.min_seconds:
            return None
        return sum(s.delivered for s in spans) / seconds, seconds

    def judge(self, now: float) -> Payoff:
        """The smallest measured count whose next measured count did not pay, with the numbers.

        Counts are compared in order of those measured, so a policy that adds two executors at a
        time (Numaflow's steps of two replicas, dynamic allocation's doubling) is judged too: the
        ``j - k`` executors from ``k`` to ``j`` pay when they add ``payoff × (j - k)`` of one
        executor's delivery at ``k``."""
        measured = {k: r for k in sorted(self._spans) if k >= 1 and (r := self.rate(now, k)) is not None}
        rates = tuple((k, round(r[0], 1), round(r[1], 1)) for k, r in measured.items())
        if self.payoff == 0:
            return Payoff(None, "", rates)
        for k, j in pairwise(measured):
            at_k, at_j = measured[k][0], measured[j][0]
            needed = self.payoff * (j - k) * at_k / k
            if at_j - at_k < needed:
                gain, share = (at_j - at_k) / at_k, needed / at_k  # at_k > 0: else needed is 0
                more = f"a {_ordinal(j)} executor" if j == k + 1 else f"{j - k} more executors ({j})"
                reason = (
                    f"{more} added {gain:.0%}: {at_k:,.0f}/s → {at_j:,.0f}/s delivered while executors "
                    f"were the limit; paying needs {share:.0%} (cluster.executorPayoff {self.payoff:g}) "
                    f"→ at most {k}"
                )
                return Payoff(k, reason, rates)
        return Payoff(None, "", rates)
