"""Where more replicas stop adding throughput: what a vertex's replicas did together, per count.

A policy that sizes by capacity per replica assumes replicas add up. They share what is under
them — in Spark local mode the driver's cores, on a cluster a shared store or an external
service — and what one replica does says nothing about that. Past the point where they stop
adding up, the vertex stays behind whatever count it asks for, its catch-up asks for still more,
and those take the cores the other vertices need (the simulator's local mode on 16 cores, step
×10: 66 % of the time behind with 2.7× the replica-seconds of stopping there).

So :class:`ReplicaReturns` keeps, per count of ready replicas, the throughput they did together
while saturated (an average that forgets as it goes, and the best of it within
``memory_seconds``: what the count can do when its share is not taken by the other vertices,
which a worse tick should not erase). :meth:`ReplicaReturns.enough` names the fewest replicas
past which more added nothing. Counts seen long ago are forgotten, so a vertex whose neighbours
went quiet may try more again.
"""

from __future__ import annotations

__all__ = ["FLAT_GAIN", "NOTHING_ADDED", "ReplicaReturns"]

# More replicas that added less than this share of what linear scaling promised, and less than
# NOTHING_ADDED of the throughput of the fewer, added nothing.
FLAT_GAIN = 0.25
NOTHING_ADDED = 0.1
MEMORY_SECONDS = 600.0


class ReplicaReturns:
    def __init__(
        self,
        flat_gain: float | None = FLAT_GAIN,
        learning: float = 0.3,
        memory_seconds: float = MEMORY_SECONDS,
    ) -> None:
        self.flat_gain = flat_gain  # None: never name a count (nothing stops the policy)
        self.learning = learning
        self.memory = memory_seconds
        self._average: dict[int, float] = {}  # ready replicas -> messages/s together, saturated
        self._best: dict[int, tuple[float, float]] = {}  # ready replicas -> (best average, when)

    def observe(self, replicas: int, total: float, now: float) -> None:
        """``replicas`` ready and saturated did ``total`` messages/s together in the last tick."""
        if replicas <= 0:
            return
        last = self._average.get(replicas)
        average = total if last is None else last + self.learning * (total - last)
        self._average[replicas] = average
        best = self._best.get(replicas)
        if best is None or average >= best[0] or now - best[1] > self.memory:
            self._best[replicas] = (average, now)

    def best(self, replicas: int, now: float) -> float | None:
        """The most ``replicas`` were seen to do together within the memory, else None."""
        seen = self._best.get(replicas)
        return seen[0] if seen is not None and now - seen[1] <= self.memory else None

    def enough(self, now: float) -> tuple[int, str] | None:
        """``(n, why)``: the fewest replicas past which more added nothing, where that was seen
        (saturated at ``n`` and at more, which added less than ``flat_gain`` of the gain linear
        scaling promised and less than a tenth of ``n``'s throughput), else None. Both: 6
        replicas of the simulator's source doing 2,500/s where 1 did 1,330/s fall far short of
        linear scaling, but stopping at 1 gave up half the throughput of a vertex behind."""
        if self.flat_gain is None:
            return None
        seen = sorted((n, total) for n, (total, at) in self._best.items() if now - at <= self.memory)
        for i, (n, total) in enumerate(seen):
            more = seen[i + 1 :]
            if more and all(
                t - total < total * min(NOTHING_ADDED, self.flat_gain * (m - n) / n) for m, t in more
            ):
                m, t = more[-1]
                return n, f"{m} replicas did {t:.0f}/s, {n} did {total:.0f}/s: more than {n} added nothing"
        return None
