"""A stateless step's shuffle partitions follow its replicas, by a restart (issue #60, part 3).

The rule is :func:`tidal.scaling.shuffle_partitions.decide_shuffle` (pure); this is its edge:
for every SQL or DataFrame step, at the controller's interval and on a thread of its own (a
restart stops the step for seconds, the controller goes on meanwhile):

- **measure**: whether the running query's last executed plan shuffles into the count it was
  started with (Spark's ``lastExecution``: a ``repartition(n)`` with its own ``n``, or a
  broadcast join, has no such shuffle and is never restarted), the replicas, the cores;
- **act**: stop the query between two batches (its reader admits nothing more first, so the
  batch in flight is the last; a batch a stop cut short is run to its commit on the old count
  first: its writer tasks key their appends by task, and a replay on another count would hand
  its rows to other tasks), start it again from its checkpoint with the new
  ``spark.sql.shuffle.partitions`` (SPARK-53942: a stateless query takes it at its restart),
  and time the pause to its first batch. Exactly once holds as for any restart: the next batch
  starts from the offsets the last one committed, and a batch cut short replays under the same
  ids into buffers that de-duplicate.

Every restart is an event (rule ``shuffle-partitions``, ``shuffleRule: follow``, with the
counts and the pause), and so is every change of verdict, so ``tidal events`` answers "why
does this step run N tasks after its shuffle?". A step's first start takes its replicas'
count (clamped to the cores); a driver started again does the same.
"""

from __future__ import annotations

import logging
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

from tidal.controller import EventLog
from tidal.scaling import Decision, Rule
from tidal.scaling.shuffle_partitions import ShuffleDecision, ShuffleLoad, decide_shuffle, replicas_count
from tidal.spark.batch.checkpoint_sync import checkpoint_of
from tidal.spark.batch.state_partitions import last_batch
from tidal.spark.query.vertex import first_batch_after
from tidal.spark.run.repartition import stop_at_a_commit
from tidal.spark.run.ticker import Ticker

__all__ = ["FIRST_BATCH_SECONDS", "STEP_CONF", "ShuffleFollower", "shuffle_counts"]

log = logging.getLogger("tidal.pipeline")

# A step's query runs its shuffle in exactly its count: Spark's adaptive execution would coalesce a
# micro-batch of a few thousand rows into one task after the shuffle (measured on 4.3.0), and the
# replicas the controller decided would split only the read side.
STEP_CONF = {"spark.sql.adaptive.coalescePartitions.enabled": "false"}
FIRST_BATCH_SECONDS = 60.0  # how long a restart waits for the query's first batch to time the pause
RECORD_KEY = "shuffle:"  # + step: the shuffle partitions its query last started with, in the control store
PAUSES_KEPT = 5  # restarts whose pauses the learnt pause is the median of
# An exchange that splits rows into a count (a broadcast exchange copies them whole: not one).
_EXCHANGE = re.compile(r"(?<![A-Za-z])Exchange (?:hashpartitioning|rangepartitioning)\(.*?, (\d+)\)")


def shuffle_counts(plan: str) -> list[int]:
    """The partition counts of the shuffles in an executed plan's text."""
    return [int(n) for n in _EXCHANGE.findall(plan)]


def last_plan(query: Any) -> str | None:
    """The text of the query's last executed plan (None before its first batch, or when gone)."""
    try:
        execution = query._jsq.streamingQuery().lastExecution()
        return None if execution is None else str(execution.executedPlan().toString())
    except Exception:  # stopped, or Py4J gone with the session: no plan to read
        return None


class ShuffleFollower:
    """The shuffle partitions of ``run``'s SQL and DataFrame steps, and their restarts."""

    conf: dict[str, str] = STEP_CONF  # what a step's query runs with besides its count

    def __init__(
        self,
        run: Any,  # a PipelineRun: queries, control, cores_allowed, start_again
        steps: list[str],
        events: EventLog,
        replicas: Callable[[str], int],
        paused: Callable[[], bool] = lambda: False,
    ) -> None:
        self.run = run
        self.steps = list(steps)
        self.events = events
        self.replicas = replicas
        self.paused = paused
        self._counts: dict[str, int] = {}
        self._kept: dict[str, int] = {}  # what the control store holds
        self._shuffles: dict[
            str, tuple[Any, bool]
        ] = {}  # per step: its running query, and whether it shuffles
        self._changed_at: dict[str, float] = {}
        self._pauses: dict[str, list[float]] = {}
        self._said: dict[str, str] = {}
        self._ticker = Ticker("tidal-shuffles", "shuffle partitions: following the replicas")

    def count(self, step: str) -> int:
        """The shuffle partitions ``step``'s query starts with, kept in the control store.

        In this driver, the last count. At a driver's start, its replicas' (clamped to the
        cores), unless the checkpoint holds a batch planned and not committed: that batch
        replays with the count it ran with (kept in the control store), or its rows would go to
        other tasks than their first attempt's, whose appends are keyed by task."""
        if step not in self._counts:
            count = replicas_count(self.replicas(step), self.run.cores_allowed()[0])
            saved = self.run.control.meta(RECORD_KEY + step)
            checkpoint = checkpoint_of(self.run.run_dir, step)
            planned, committed = last_batch(checkpoint / "offsets"), last_batch(checkpoint / "commits")
            if saved and saved.isdigit() and planned is not None and planned != committed:
                count = int(saved)
                log.info("vertex %s: batch %d replays on its %d shuffle partitions", step, planned, count)
            self._counts[step] = count
        if self._kept.get(step) != self._counts[step]:  # a write per change, not per tick
            self.run.control.set_meta(RECORD_KEY + step, str(self._counts[step]))
            self._kept[step] = self._counts[step]
        return self._counts[step]

    def learnt_pause(self, step: str) -> float | None:
        pauses = self._pauses.get(step)
        return statistics.median(pauses) if pauses else None

    def load(self, step: str) -> ShuffleLoad:
        query = self.run.queries.get(step)
        current = self.count(step)
        known = self._shuffles.get(step)
        if known is not None and known[0] is query:  # a query's plan is fixed: read it once
            shuffles: bool | None = known[1]
        else:
            plan = None if query is None else last_plan(query)
            shuffles = None if plan is None else current in shuffle_counts(plan)
            if shuffles is not None:
                self._shuffles[step] = (query, shuffles)
        return ShuffleLoad(
            partitions=current,
            replicas=self.replicas(step),
            cores=self.run.cores_allowed()[0],
            shuffles=shuffles,
            last_change_at=self._changed_at.get(step),
            pause=self.learnt_pause(step),
        )

    def tick(self, now: float) -> list[ShuffleDecision]:
        out = []
        for step in self.steps:
            decision = decide_shuffle(self.load(step), now)
            self._say(step, decision, now)
            if decision.changed:
                self.restart(step, decision)
            out.append(decision)
        return out

    def restart(self, step: str, decision: ShuffleDecision) -> float | None:
        """Start ``step``'s query again with ``decision.desired`` shuffle partitions; the pause."""
        before = self.count(step)
        query = self.run.queries[step]
        last = int((query.lastProgress or {}).get("batchId", -1))
        stopped = time.monotonic()
        self.run.control.set_holding(step, True)
        try:
            cut = stop_at_a_commit(
                lambda: self.run.queries[step],
                lambda: self.run.start_again(step),
                checkpoint_of(self.run.run_dir, step),
            )
        finally:
            self.run.control.set_holding(step, False)
        if cut is not None:  # a batch planned on the old count is left: it must replay on it
            self._changed_at[step] = time.time()
            log.warning("vertex %s: shuffle partitions stay %d: %s", step, before, cut)
            self.run.start_again(step)
            return None
        self._counts[step] = decision.desired
        try:
            restarted = self.run.start_again(step)
        except Exception as exc:  # the step must not stay stopped: back on its old count
            self._counts[step] = before
            self._changed_at[step] = time.time()  # and not tried again before the cooldown
            log.warning("vertex %s: restart on %d shuffle partitions failed (%s); back on %d",
                        step, decision.desired, exc, before)  # fmt: skip
            self.run.start_again(step)
            return None
        pause = first_batch_after(restarted, last, stopped, FIRST_BATCH_SECONDS)
        self._changed_at[step] = time.time()
        if pause is not None:
            self._pauses.setdefault(step, []).append(pause)
            del self._pauses[step][:-PAUSES_KEPT]
        replicas = self.replicas(step)
        reason = decision.reason + (
            f"; paused {pause:.1f} s" if pause is not None else "; no batch since (no input)"
        )
        inputs = {**decision.inputs, "shuffleRule": decision.rule, "shufflePartitionsBefore": before,
                  "shufflePartitionsAfter": decision.desired,
                  "pause_seconds": None if pause is None else round(pause, 3)}  # fmt: skip
        decided = Decision(step, time.time(), replicas, replicas, Rule.SHUFFLE_PARTITIONS, reason, inputs)
        self.events.record(decided, news=True)
        self._said[step] = "restarted"
        log.info("vertex %s: %s", step, reason)
        return pause

    def _say(self, step: str, decision: ShuffleDecision, now: float) -> None:
        if decision.changed or decision.rule == "unplanned" or self._said.get(step) == decision.rule:
            return
        self._said[step] = decision.rule
        replicas = self.replicas(step)
        inputs = {**decision.inputs, "shuffleRule": decision.rule}
        self.events.record(
            Decision(step, now, replicas, replicas, Rule.SHUFFLE_PARTITIONS,
                     f"shuffle partitions: {decision.reason}", inputs),
            news=True,
        )  # fmt: skip

    # -- the thread ------------------------------------------------------------------------------

    def start(self, interval: Callable[[], float]) -> ShuffleFollower:
        if self.steps:
            self._ticker.start(self.tick, interval, self.paused)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._ticker.stop(timeout)
