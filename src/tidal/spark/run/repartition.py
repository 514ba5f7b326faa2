"""Moving a running reduce vertex's state to another number of partitions (issue #60, part 1).

A reduce vertex's state is split into partitions fixed in its checkpoint at the first batch
(:mod:`tidal.spark.query.reduce`). To change them while the pipeline runs, a move:

1. stops the vertex's query between two micro-batches (a stop that cut a batch short starts it
   again until that batch committed: Spark refuses to repartition after an unfinished batch);
2. repartitions its checkpoint with Spark's offline API (``StreamingCheckpointManager.repartition``,
   experimental, Spark ≥ 4.2, RocksDB state only), which appends one batch holding the state
   rewritten into the new count and reading no input;
3. starts the query again: Spark takes the count from the checkpoint.

Meanwhile the upstream vertices go on writing into the vertex's buffer (back pressure applies as
usual), and the sinks downstream resume with the first batch after the restart. Exactly once
holds through a move: the repartition batch reads nothing, every later batch starts from the
offsets the last one committed, and the windows it closes are written under the same ids as
without a move (the output buffers de-duplicate a replay).

If Spark refuses or fails, what it began is undone
(:func:`~tidal.spark.batch.state_partitions.abandon_repartition`) and the query starts again on
its old count; the event carries Spark's reason, and another move of that vertex is refused for
:data:`BACKOFF_SECONDS`. A driver killed during a move leaves either nothing (killed before
Spark's call), a finished repartition (after it), or an unfinished one, which the next start of
the query completes to the same count, as Spark asks (and abandons if that fails too). Every move
is an event (rule ``repartitioned`` or ``repartition-failed``) with its counts, who asked, and the
pause it cost: from the stop to the first batch after the restart.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidal.controller import EventLog
from tidal.failpoints import failpoint
from tidal.isb.control import ControlStore
from tidal.scaling import Decision, Rule
from tidal.spark.batch.checkpoint_sync import checkpoint_of
from tidal.spark.batch.state_partitions import (
    abandon_repartition,
    committed_partitions,
    last_batch,
    unfinished_repartition,
)
from tidal.spark.query.vertex import first_batch_after, stop_between_batches

__all__ = [
    "BACKOFF_SECONDS",
    "FIRST_BATCH_SECONDS",
    "Move",
    "StatePartitions",
    "repartition",
    "spark_reason",
    "stop_at_a_commit",
]

log = logging.getLogger("tidal.pipeline")

BACKOFF_SECONDS = 60.0  # after a failed move, no other move of that vertex before this
FIRST_BATCH_SECONDS = 300.0  # how long a move waits for the restarted query's first batch
PAUSES_KEPT = 5  # moves whose pauses the learnt pause is the median of
STOP_ATTEMPTS = 3  # stops that may cut a batch short before the move gives up
RECORD_KEY = "partitions:"  # + vertex: {"count": n, "moving_to": m | null} in the control store


@dataclass(frozen=True, slots=True)
class Move:
    """The outcome of one move: the counts, whether Spark did it, why not, and what it cost."""

    vertex: str
    before: int
    requested: int
    after: int
    ok: bool
    reason: str
    pause: float | None  # seconds from the stop to the first batch after the restart
    repartition_seconds: float
    stop_seconds: float = 0.0  # of the pause: stopping the query between two batches


def repartition(spark: Any, checkpoint: Path, partitions: int) -> None:
    """Spark's offline repartition of ``checkpoint``'s state into ``partitions``.

    Spark runs it in a session of its own that it leaves active on the calling thread (measured
    on 4.3.0): the next query started from that thread then missed the session's Python data
    sources (``DATA_SOURCE_NOT_FOUND: tidal_vertex``). So the run's session is made active again."""
    jvm_session = spark._jvm.org.apache.spark.sql.SparkSession
    try:
        spark._streamingCheckpointManager.repartition(str(checkpoint), partitions)
    finally:
        jvm_session.setActiveSession(spark._jsparkSession)


def spark_reason(exc: BaseException) -> str:
    """Spark's own words from a failed call through Py4J: its error class and message, without
    the JVM's stack (``[STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER] …``)."""
    text = str(exc)
    found = re.search(r"(\[[A-Z][A-Z_]*(?:\.[A-Z_]+)*\] .*?)(?: SQLSTATE: \w+|\n\s+at |\Z)", text, re.S)
    if found:
        return " ".join(found.group(1).split())
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("at ")]
    return lines[-1].strip() if lines else repr(exc)


def stop_at_a_commit(query: Callable[[], Any], start: Callable[[], Any], checkpoint: Path) -> str | None:
    """Stop the query with every batch it planned committed; None, or why it could not.

    A stop may still cut a batch short (its offsets written, its commit not). Before a change
    that the batch's replay must not see (a repartition; a step's new shuffle count, which would
    hand the replayed rows to other tasks than their first attempt's), the query is started
    again as it was, until that batch committed, and stopped again."""
    for _ in range(STOP_ATTEMPTS):
        stop_between_batches(query(), timeout=FIRST_BATCH_SECONDS)
        planned, committed = last_batch(checkpoint / "offsets"), last_batch(checkpoint / "commits")
        if planned is None or planned == committed:
            return None
        # The stop cut batch ``planned`` short: run it to its commit, then stop again.
        restarted = start()
        deadline = time.monotonic() + FIRST_BATCH_SECONDS
        while time.monotonic() < deadline and restarted.isActive:
            done = last_batch(checkpoint / "commits")
            if done is not None and done >= planned:
                break
            time.sleep(0.1)
    return f"the query could not be stopped between two batches in {STOP_ATTEMPTS} attempts"


class StatePartitions:
    """The state partitions of a run's reduce vertices: their current counts and the moves.

    ``initial``: each reduce vertex's count from the spec (``partitions``, 1 when unset), which
    applies until its checkpoint has a committed batch; from then on the checkpoint's count does,
    so a run started again on its directory keeps what the last move made. The count is also
    kept in the control store (with a move in progress), for ``tidal get``/events and for a
    restarted driver to tell an interrupted move from none."""

    def __init__(
        self, run_dir: Path, initial: dict[str, int], control: ControlStore, events: EventLog
    ) -> None:
        self.run_dir = run_dir
        self.initial = dict(initial)
        self.control = control
        self.events = events
        self._lock = threading.Lock()  # one move at a time
        self._failed_at: dict[str, float] = {}
        self.moving: str | None = None
        self.moved_at: dict[str, float] = {}  # when each vertex's last move (done or not) ended
        self._pauses: dict[str, list[float]] = {}  # the pauses its last moves cost, newest last

    # -- reading ---------------------------------------------------------------------------------

    def checkpoint(self, vertex: str) -> Path:
        return checkpoint_of(self.run_dir, vertex)

    def count(self, vertex: str) -> int:
        """The partitions ``vertex``'s query runs with at its next start."""
        found = committed_partitions(self.checkpoint(vertex))
        return found if found is not None else self.initial.get(vertex, 1)

    def learnt_pause(self, vertex: str) -> float | None:
        """The pause a move of ``vertex`` costs: the median of its last :data:`PAUSES_KEPT`
        moves' (any vertex's when it has none yet; None before the run's first move)."""
        seen = self._pauses.get(vertex) or [p for ps in self._pauses.values() for p in ps]
        if not seen:
            return None
        ordered = sorted(seen[-PAUSES_KEPT:])
        return ordered[len(ordered) // 2]

    def retry_in(self, vertex: str, now: float) -> float:
        """Seconds before another move of ``vertex`` is allowed (0: now)."""
        failed = self._failed_at.get(vertex)
        return 0.0 if failed is None else max(0.0, failed + BACKOFF_SECONDS - now)

    def _save(self, vertex: str, count: int, moving_to: int | None) -> None:
        self.control.set_meta(RECORD_KEY + vertex, json.dumps({"count": count, "moving_to": moving_to}))

    def _record(self, vertex: str) -> dict[str, Any]:
        raw = self.control.meta(RECORD_KEY + vertex)
        try:
            return dict(json.loads(raw)) if raw else {}
        except ValueError:
            return {}

    # -- at a query's start ----------------------------------------------------------------------

    def prepare(self, spark: Any, vertex: str, replicas: int) -> None:
        """Before ``vertex``'s query starts: complete a repartition a killed driver left unfinished
        (abandon it if Spark fails again), and note a move the kill cut before Spark's call."""
        if self.moving == vertex:  # the move itself starts the query again: nothing was cut
            return
        self.control.set_holding(vertex, False)  # a driver killed mid-move left its reader held
        checkpoint = self.checkpoint(vertex)
        record = self._record(vertex)
        unfinished = unfinished_repartition(checkpoint)
        if unfinished is not None:
            before = unfinished.before if unfinished.before is not None else self.count(vertex)
            started = time.monotonic()
            try:
                repartition(spark, checkpoint, unfinished.after)
                ok, why = (
                    True,
                    "completed at the query's start: the driver stopped during Spark's repartition",
                )
            except Exception as exc:
                removed = abandon_repartition(checkpoint, unfinished)
                ok, why = (
                    False,
                    (
                        f"Spark's repartition failed again at the query's start ({spark_reason(exc)}); "
                        f"undone ({len(removed)} files removed): the state stays in {before} partitions"
                    ),
                )
            took = time.monotonic() - started
            after = self.count(vertex)
            self._event(
                Move(vertex, before, unfinished.after, after, ok, why, None, took), replicas, "restart"
            )
        elif record.get("moving_to") is not None and self.count(vertex) == int(record["moving_to"]):
            count = self.count(vertex)  # the checkpoint's: Spark's repartition was done
            why = "completed: the driver stopped after Spark's repartition, before the move's end"
            self._event(
                Move(vertex, int(record["count"]), count, count, True, why, None, 0.0), replicas, "restart"
            )
        elif record.get("moving_to") is not None:
            count = self.count(vertex)
            why = (
                f"the move to {record['moving_to']} partitions was cut by a driver stop before Spark's "
                f"repartition began: the state stays in {count} partitions"
            )
            self._event(
                Move(vertex, count, int(record["moving_to"]), count, False, why, None, 0.0),
                replicas,
                "restart",
            )
        if unfinished is not None or record.get("moving_to") is not None:
            self._save(vertex, self.count(vertex), None)

    # -- a move ----------------------------------------------------------------------------------

    def move(
        self,
        vertex: str,
        partitions: int,
        *,
        spark: Any,
        query: Callable[[], Any],
        start: Callable[[], Any],
        replicas: int,
        by: str,
    ) -> Move:
        """Move ``vertex``'s state to ``partitions`` (see the module's docstring); blocks until the
        restarted query ran its first batch (or :data:`FIRST_BATCH_SECONDS` passed). ``query()``
        is the vertex's running query, ``start()`` starts it again and returns it."""
        with self._lock:
            self.moving = vertex
            try:
                return self._move(vertex, partitions, spark, query, start, replicas, by)
            finally:
                self.moving = None

    def _move(
        self, vertex: str, partitions: int, spark: Any, query: Callable[[], Any], start: Callable[[], Any],
        replicas: int, by: str,
    ) -> Move:  # fmt: skip
        checkpoint = self.checkpoint(vertex)
        before = self.count(vertex)
        self._save(vertex, before, partitions)
        failpoint("move:recorded")
        stopped = time.monotonic()
        # Its reader admits nothing more: the batch in flight is the last, and the stop follows
        # it. Without this a vertex with a backlog runs batches back to back and the stop waited
        # for the backlog to drain (27 s in the policy's test, up to FIRST_BATCH_SECONDS).
        self.control.set_holding(vertex, True)
        try:
            cut = stop_at_a_commit(query, start, checkpoint)
        finally:
            self.control.set_holding(vertex, False)
        stop_took = time.monotonic() - stopped
        ok, reason, took = False, cut or "", 0.0
        failpoint("move:stopped")
        if cut is None:
            began = time.monotonic()
            try:
                repartition(spark, checkpoint, partitions)
                failpoint("move:repartitioned")
                ok, reason = (
                    True,
                    f"state moved from {before} to {partitions} partitions by Spark's repartition",
                )
            except Exception as exc:
                unfinished = unfinished_repartition(checkpoint)
                removed = [] if unfinished is None else abandon_repartition(checkpoint, unfinished)
                reason = f"Spark's repartition failed: {spark_reason(exc)}" + (
                    f"; its unfinished batch undone ({len(removed)} files removed)" if removed else ""
                )
            took = time.monotonic() - began
        after = self.count(vertex)
        self._save(vertex, after, None)
        failpoint("move:saved")
        last = last_batch(checkpoint / "commits")
        restarted = start()
        failpoint("move:restarted")
        pause = first_batch_after(restarted, -1 if last is None else last, stopped, FIRST_BATCH_SECONDS)
        if not ok:
            self._failed_at[vertex] = time.time()
            reason += (
                f"; the query runs on its {after} partitions again, no new move for {BACKOFF_SECONDS:g} s"
            )
        move = Move(vertex, before, partitions, after, ok, reason, pause, took, stop_took)
        self.moved_at[vertex] = time.time()
        if pause is not None:
            self._pauses.setdefault(vertex, []).append(pause)
            del self._pauses[vertex][:-PAUSES_KEPT]
        self._event(move, replicas, by)
        return move

    def _event(self, move: Move, replicas: int, by: str) -> None:
        rule = Rule.REPARTITIONED if move.ok else Rule.REPARTITION_FAILED
        inputs = {
            "partitions": move.after,
            "partitions_before": move.before,
            "partitions_requested": move.requested,
            "pause_seconds": None if move.pause is None else round(move.pause, 3),
            "repartition_seconds": round(move.repartition_seconds, 3),
            "stop_seconds": round(move.stop_seconds, 3),
            "by": by,
        }
        reason = (
            f"state partitions {move.before} → {move.after} (asked {move.requested} by {by}): {move.reason}"
        )
        if move.pause is not None:
            reason += f"; paused {move.pause:.1f} s"
        self.events.record(
            Decision(move.vertex, time.time(), replicas, replicas, rule, reason, inputs), news=True
        )
        (log.info if move.ok else log.warning)("vertex %s: %s", move.vertex, reason)
