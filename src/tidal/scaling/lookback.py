"""Numaflow's dynamic lookback (``spec/numaflow.md`` §3.4): the window stretches over the longest
spell in which a pod's (MonoVertex) or a partition's (vertex) read count did not change, so a
slow, bursty step is not judged idle between two of its outputs.

:func:`max_unchanged_seconds` is upstream's ``CalculateMaxLookback`` / ``CalculateLookback``;
:func:`adaptive_lookback` is ``updateDynamicLookbackSecs`` over a :class:`~tidal.scaling.rates.Rater`
or :class:`~tidal.scaling.rates.CounterWindow`. The deliberate differences (an idle vertex's
trailing quiet run, the rounding granularity) are listed in :mod:`tidal.scaling.rates`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tidal.scaling.rates import MAX_LOOKBACK_SECONDS, CounterWindow, Rater

__all__ = ["adaptive_lookback", "max_unchanged_seconds"]


def adaptive_lookback(
    counts: CounterWindow | Rater,
    now: float,
    current: float,
    configured: float,
    maximum: float = MAX_LOOKBACK_SECONDS,
    *,
    idle: bool = False,
    granularity: float = 60.0,
) -> float:
    """Numaflow's dynamic lookback (§3.4): stretch the window to cover the longest quiet spell.

    Over the last ``3 × current`` seconds (newest sample excluded), find the longest interval in
    which any series' counter did not increase (:func:`max_unchanged_seconds`: per pod for a
    MonoVertex, per partition for a vertex, as upstream), round it up to a whole minute, and then
    grow to at most ``maximum`` or shrink to no less than the configured lookback.

    With fewer than two samples the current lookback is kept. ``counts`` is a
    :class:`CounterWindow` (its summed count, one series) or the controller's :class:`Rater` (its
    series as recorded: several when the caller recorded several, else its processed count).

    ``idle`` (deliberate difference): nothing is known to be pending now, so the trailing quiet
    run is idleness, not slow processing, and does not count. Upstream counts it, and an idle
    vertex's window then grows every 30 s until it takes in the backlog it drained minutes ago:
    the averaged pending comes back and the idle vertex is scaled up again (measured in
    ``tests/integration/test_controller.py`` when this was wired in).
    """
    start = counts._start_index(now, 3.0 * current)
    if start is None:
        return current
    if isinstance(counts, Rater):
        timeline = counts.timeline(start)
    else:
        timeline = [(t, {"processed": c}) for t, c in counts.totals()[start - counts._start :]]
    longest = max_unchanged_seconds(timeline, 0, len(timeline) - 2, trailing=not idle)
    result = math.ceil(longest / granularity) * granularity
    if result > current:
        return min(result, maximum)
    return max(result, configured)


def max_unchanged_seconds(
    timeline: list[tuple[float, Mapping[str, float]]], start: int, end: int, *, trailing: bool = True
) -> float:
    """Numaflow's ``CalculateMaxLookback`` (MonoVertex, per pod) and ``CalculateLookback``
    (vertex, per partition): the longest time any one series' counter stayed unchanged between
    rows ``start`` and ``end`` of ``timeline`` (``(timestamp, counters by series)``).

    A series' spell ends when its counter increases; a decrease is a restart and a new baseline;
    a series still unchanged at ``end`` counts up to ``end`` if it is there and non-zero
    (``finalizeDurations``). ``trailing=False`` leaves that last part out (Tidal's idle vertex,
    see :func:`adaptive_lookback`). The answer is the maximum over the series.
    """
    last_seen: dict[str, tuple[float, float]] = {}  # series -> (count, seen at)
    longest: dict[str, float] = {}
    for at, counts in timeline[start : end + 1]:
        for key, count in counts.items():
            seen = last_seen.get(key)
            if seen is not None and seen[0] == count:
                continue
            if seen is not None and count > seen[0]:
                longest[key] = max(longest.get(key, at - seen[1]), at - seen[1])
            last_seen[key] = (count, at)
    if trailing and timeline[start : end + 1]:
        end_at, end_counts = timeline[end]
        for key, (count, seen_at) in last_seen.items():
            if key in end_counts and count != 0:
                longest[key] = max(longest.get(key, end_at - seen_at), end_at - seen_at)
    return max(longest.values(), default=0.0)
