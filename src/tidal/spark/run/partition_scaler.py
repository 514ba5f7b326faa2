"""The state-partition policy at work: a reduce vertex with ``statePartitions`` moves by itself.

Every controller interval, on a thread of its own (a move stops the vertex's query for seconds,
and the replica controller must go on meanwhile), for each reduce vertex whose spec sets
``statePartitions``: measure (:class:`~tidal.scaling.state_partitions.StateLoad`), decide
(:func:`~tidal.scaling.state_partitions.decide_partitions`, pure), and move when it says so
(:meth:`PipelineRun.move_partitions`, the path ``tidal scale --partitions`` takes, whose event
says who asked: here the policy, with its rule and reason).

**What is measured where.** A batch's wall seconds come from Spark's progress of the vertex's
running query (``durationMs.triggerExecution``); the query is started again by every move and
every driver start, so its progress holds exactly the batches since then. The stateful stage's
busy seconds come from the batch ledger (the post-shuffle tasks of
:class:`~tidal.spark.query.reduce.ReduceWriter` time the state update, the handler and the
writes); the backlog and the rate are the replica controller's, over its lookback. The pause a
move cost is learnt from the moves themselves (:class:`~tidal.spark.run.repartition.StatePartitions`).

A verdict is an event (rule ``state-partitions``, the policy's own rule in ``partitionRule``)
when it differs from the last one, so ``tidal events`` answers "why did (or didn't) it move?".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from tidal.controller import EventLog
from tidal.scaling import Decision, Rule
from tidal.scaling.state_partitions import (
    BatchTiming,
    PartitionBounds,
    PartitionDecision,
    StateLoad,
    decide_partitions,
)
from tidal.spark.run.ticker import Ticker
from tidal.spec.model import PipelineSpec
from tidal.spec.scale import numaflow_scale

__all__ = ["PartitionScaler"]

log = logging.getLogger("tidal.pipeline")


class _Run(Protocol):
    """What the scaler reads of :class:`~tidal.spark.run.pipeline.PipelineRun`."""

    spec: PipelineSpec
    queries: dict[str, Any]
    partitions: Any  # StatePartitions
    control: Any  # ControlStore: the batch ledger

    def cores_allowed(self) -> tuple[int, str]: ...

    def move_partitions(self, name: str, partitions: int, by: str) -> Any: ...


def wall_seconds(query: Any) -> dict[int, float]:
    """Per batch id of the running query, its wall seconds (Spark's ``triggerExecution``)."""
    out: dict[int, float] = {}
    for progress in query.recentProgress or []:
        duration = (progress.get("durationMs") or {}).get("triggerExecution")
        if duration and int(progress.get("numInputRows") or 0) > 0:
            out[int(progress["batchId"])] = float(duration) / 1000.0
    return out


class PartitionScaler:
    """Decides and moves the state partitions of ``run``'s reduce vertices with ``statePartitions``."""

    def __init__(
        self,
        run: _Run,
        events: EventLog,
        metrics: Callable[[], Mapping[str, tuple[float | None, float | None]]],
        replicas: Callable[[str], int],
        paused: Callable[[], bool] = lambda: False,
    ) -> None:
        self.run = run
        self.events = events
        self.metrics = metrics  # the replica controller's (rate, averaged pending) per vertex
        self.replicas = replicas
        self.paused = paused
        self.vertices = [v.name for v in run.spec.vertices if v.state_partitions is not None]
        self._said: dict[str, str] = {}
        self._ticker = Ticker("tidal-partitions", "state partition policy")

    def load(self, vertex: str, now: float) -> StateLoad:
        """What the policy decides on for ``vertex`` now (see the module's docstring)."""
        spec = self.run.spec.vertex(vertex)
        query = self.run.queries.get(vertex)
        walls = wall_seconds(query) if query is not None else {}
        first = min(walls) if walls else None
        busy = {} if first is None else dict(self.run.control.busy_after(vertex, first - 1))
        timed = tuple(BatchTiming(b, walls[b], busy[b]) for b in sorted(walls) if b in busy)
        rate, pending = self.metrics().get(vertex, (None, None))
        moves = self.run.partitions
        return StateLoad(
            partitions=moves.count(vertex),
            cores=self.run.cores_allowed()[0],
            batches=timed,
            pending=pending,
            rate=rate,
            target_seconds=numaflow_scale(spec.scale).target_processing_seconds,
            last_move_at=moves.moved_at.get(vertex),
            pause=moves.learnt_pause(vertex),
            retry_at=now + moves.retry_in(vertex, now),
        )

    def bounds(self, vertex: str) -> PartitionBounds:
        given = self.run.spec.vertex(vertex).state_partitions
        assert given is not None
        return PartitionBounds(given.min, given.max, given.cooldown_seconds)

    def tick(self, now: float) -> list[PartitionDecision]:
        """Decide for every vertex; move those the policy moves (blocking, one at a time)."""
        out = []
        for vertex in self.vertices:
            if self.run.partitions.moving is not None:
                break  # a hand move is under way: decide again next time, on what it left
            decision = decide_partitions(self.load(vertex, now), self.bounds(vertex), now)
            self._say(vertex, decision, now)
            if decision.changed:
                self.run.move_partitions(
                    vertex, decision.desired, by=f"the partition policy ({decision.rule}: {decision.reason})"
                )
            out.append(decision)
        return out

    def _say(self, vertex: str, decision: PartitionDecision, now: float) -> None:
        if self._said.get(vertex) == decision.rule:
            return
        self._said[vertex] = decision.rule
        replicas = self.replicas(vertex)
        reason = f"state partitions: {decision.reason}"
        inputs = {**decision.inputs, "partitionRule": decision.rule, "partitionsDesired": decision.desired}
        self.events.record(
            Decision(vertex, now, replicas, replicas, Rule.STATE_PARTITIONS, reason, inputs), news=True
        )
        log.info("vertex %s: %s", vertex, reason)

    # -- the thread ------------------------------------------------------------------------------

    def start(self, interval: Callable[[], float]) -> PartitionScaler:
        if self.vertices:
            self._ticker.start(self.tick, interval, self.paused)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._ticker.stop(timeout)


def start_partition_scaler(run: Any) -> PartitionScaler:
    """The scaler of ``run`` (a started :class:`~tidal.spark.run.pipeline.PipelineRun`), ticking
    at the controller's interval; it starts no thread when no vertex sets ``statePartitions``."""
    controller = run.controller
    scaler = PartitionScaler(
        run,
        EventLog(run.run_dir / "events.jsonl"),
        metrics=controller.metrics,
        replicas=run._replicas,
        paused=lambda: bool(controller.paused),
    )
    return scaler.start(lambda: float(controller.spec.controller.interval_seconds))
