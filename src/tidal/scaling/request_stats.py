"""Knative's request statistics (``netstats.RequestStats``, ``spec/knative.md`` §3.2), pure.

The queue-proxy beside every HTTP receiver and the activator both keep one: concurrency is
**time-weighted** — on every arrival, departure and report, ``concurrency × Δt`` and ``Δt`` are
accumulated — so a request that spans the whole period counts 1.0 and one that spans half of it
0.5, whatever the sampling. ``report(now)`` returns the period's averages and arrival counts and
starts the next period. A request that came through the activator is *proxied*; it counts in
both the total and the proxied figures, so the autoscaler can subtract what the activator
already reported (§3.5).

Time is an argument (seconds), as everywhere in :mod:`tidal.scaling`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConcurrencyReporter", "RequestStat", "RequestStats"]


@dataclass(frozen=True, slots=True)
class RequestStat:
    """One period's report: averages over the period, arrivals per second (Knative's Stat)."""

    at: float
    average_concurrency: float
    average_proxied_concurrency: float
    requests_per_second: float
    proxied_requests_per_second: float
    period: float

    def to_dict(self) -> dict[str, float]:
        return {
            "at": self.at,
            "concurrency": self.average_concurrency,
            "proxied_concurrency": self.average_proxied_concurrency,
            "rps": self.requests_per_second,
            "proxied_rps": self.proxied_requests_per_second,
            "period": self.period,
        }


class RequestStats:
    """In-flight requests over time; ``enter``/``leave`` at each event, ``report`` once a period."""

    def __init__(self, now: float) -> None:
        self._last = now  # the time of the last event or report
        self._period_start = now
        self.concurrency = 0
        self.proxied_concurrency = 0
        self._weighted = 0.0  # Σ concurrency × Δt
        self._proxied_weighted = 0.0
        self._elapsed = 0.0  # Σ Δt
        self._count = 0
        self._proxied_count = 0

    def _advance(self, now: float) -> None:
        dt = now - self._last
        if dt > 0:  # a clock that went back is ignored, as upstream does
            self._weighted += self.concurrency * dt
            self._proxied_weighted += self.proxied_concurrency * dt
            self._elapsed += dt
            self._last = now

    def enter(self, now: float, proxied: bool = False) -> None:
        self._advance(now)
        self.concurrency += 1
        self._count += 1
        if proxied:
            self.proxied_concurrency += 1
            self._proxied_count += 1

    def leave(self, now: float, proxied: bool = False) -> None:
        self._advance(now)
        self.concurrency = max(0, self.concurrency - 1)
        if proxied:
            self.proxied_concurrency = max(0, self.proxied_concurrency - 1)

    def report(self, now: float) -> RequestStat:
        """The period since the last report; counts are divided by its length (per second)."""
        self._advance(now)
        period = max(now - self._period_start, 0.0)
        per = period if period > 0 else 1.0
        stat = RequestStat(
            at=now,
            average_concurrency=self._weighted / self._elapsed if self._elapsed > 0 else 0.0,
            average_proxied_concurrency=self._proxied_weighted / self._elapsed if self._elapsed > 0 else 0.0,
            requests_per_second=self._count / per,
            proxied_requests_per_second=self._proxied_count / per,
            period=period,
        )
        self._weighted = self._proxied_weighted = self._elapsed = 0.0
        self._count = self._proxied_count = 0
        self._period_start = now
        return stat


class ConcurrencyReporter:
    """The activator's concurrency reporter for one source (``pkg/activator/handler/
    concurrency_reporter.go``): its :class:`RequestStats`, plus an immediate report on the first
    request after a quiet period.

    The first request for a source with no stat entry creates one and is reported at once as
    concurrency 1, one request (``request_in`` returns True: send it now, it is what wakes a
    source at zero without waiting for the period). The next periodic ``report`` subtracts that
    request so it is not counted twice, and an entry whose period averaged no concurrency at all
    is dropped, so the next request after it is reported at once again.
    """

    def __init__(self) -> None:
        self._stats: RequestStats | None = None
        self._first = 0.0

    @property
    def in_flight(self) -> int:
        return 0 if self._stats is None else self._stats.concurrency

    def request_in(self, now: float) -> bool:
        """A request arrived; True when it creates the entry (report ``{1, 1}`` at once)."""
        created = self._stats is None
        if self._stats is None:
            self._stats = RequestStats(now)
            self._first = 1.0
        self._stats.enter(now, proxied=True)
        return created

    def request_out(self, now: float) -> None:
        if self._stats is not None:
            self._stats.leave(now, proxied=True)

    def report(self, now: float) -> RequestStat | None:
        """The period's report with the immediate one subtracted; None with no entry (nothing to
        report: upstream sends no message for a source without one)."""
        stats = self._stats
        if stats is None:
            return None
        stat = stats.report(now)
        first, self._first = self._first, 0.0
        if stat.average_concurrency == 0 and stats.concurrency == 0:
            self._stats = None  # quiet for the whole period: the next request reports at once
        per = stat.period if stat.period > 0 else 1.0
        return RequestStat(
            at=stat.at,
            average_concurrency=max(stat.average_concurrency - first, 0.0),
            average_proxied_concurrency=max(stat.average_proxied_concurrency - first, 0.0),
            requests_per_second=stat.requests_per_second - first / per,
            proxied_requests_per_second=stat.proxied_requests_per_second - first / per,
            period=stat.period,
        )
