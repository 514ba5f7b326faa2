"""Is a vertex's sink failing? The share of its message writes retried over the lookback.

A vertex whose sink refuses writes and retries them (``sink.retryStrategy``,
:mod:`tidal.spark.sinks.routes`) processes slower while its pending grows, and every autoscaler
that sizes on pending then scales it up: Numaflow's does (numaproj/numaflow #136, an ineffective
scale-up), KEDA's does (kedacore/keda #7092). More replicas do not make a refusing system accept
more; they send it more writes to refuse. So Tidal's Numaflow policy holds a scale-up while at
least :data:`FAILING_SHARE` of the sink's writes were retried over the lookback (rule
``sink-failing``), and scales down and to zero as usual. Numaflow has no such rule; this is a
deliberate difference, in ``docs/scaling.md``.

Pure: the controller hands it the cumulative counters and the time.
"""

from __future__ import annotations

from collections import deque

__all__ = ["FAILING_SHARE", "SinkHealth"]

FAILING_SHARE = 0.05  # of message writes retried over the lookback: the sink is failing


class SinkHealth:
    """A window of ``(now, processed, retried)`` samples, cumulative counters."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, float, float]] = deque()

    def record(self, now: float, processed: float, retried: float | None) -> None:
        if retried is None:
            return
        if self._samples and (processed < self._samples[-1][1] or retried < self._samples[-1][2]):
            self._samples.clear()  # the counters went back (a new run directory): start again
        self._samples.append((now, processed, retried))

    def retried_share(self, now: float, lookback: float) -> float | None:
        """Retried writes / (processed + retried) over the last ``lookback`` seconds; None
        before two samples, or when nothing was written or retried in the window."""
        while len(self._samples) > 2 and self._samples[1][0] <= now - lookback:
            self._samples.popleft()  # keep one sample at or before the window's start
        if len(self._samples) < 2:
            return None
        _, processed0, retried0 = self._samples[0]
        _, processed1, retried1 = self._samples[-1]
        retried = retried1 - retried0
        attempts = (processed1 - processed0) + retried
        return None if attempts <= 0 else retried / attempts
