"""Executors follow replicas: the allocator that runs beside the controller on a cluster manager.

Every ``interval`` seconds it sums the replicas the controller set, lists the registered
executors (Spark's status store, through py4j: :mod:`tidal.spark.cluster.spark_executors`), asks
:func:`~tidal.scaling.executors.decide_executors` what to do and does it:
``requestTotalExecutors`` (absolute: a relative request after a kill did nothing, measured) to
grow, ``killExecutors`` on the chosen ids to shrink. Each decision that changes something, or
whose rule differs from the last one written, is a line in ``RUN_DIR/executors.jsonl``; so are
each executor's start-up (request → registered → first task done) and every change of the
registered count (the report's executor-seconds and panel).

It also says which replicas are ready: the registered executors' cores shared among the
vertices (:func:`~tidal.scaling.executors.ready_slots`), which the probe uses to cap what the
micro-batches ran — on a cluster a partition without a core waits in Spark's queue. It writes
the same shares into the control record as they change (``publish``), and admission takes no
more replicas into a batch than a vertex has slots (:mod:`tidal.spark.batch.admission`), so a
scale-up waiting for executors does not stall the batches of the replicas already running.

With SQLite buffers every task opens the pipeline's database file on the driver's disk, so an
executor on another host is refused: the allocator records the error and the run stops with it,
naming ``jetstream`` as the fix.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from tidal import errors
from tidal.scaling.executor_payoff import ExecutorPayoff, Payoff
from tidal.scaling.executors import (
    Executor,
    ExecutorBounds,
    ExecutorDecision,
    ExecutorRule,
    decide_executors,
    ready_slots,
)
from tidal.spark.cluster.executor_starts import StartFailures
from tidal.spark.cluster.spark_executors import SparkExecutors

__all__ = ["ExecutorAllocator", "read_executor_log", "start_allocator"]

log = logging.getLogger("tidal.executors")

KILL_TIMEOUT = 30.0  # seconds a killed executor may stay listed before it counts again
FAILURES_EVERY = 2.0  # seconds between looks at the workers for executors that died starting
BACKOFF_FIRST, BACKOFF_MAX = 5.0, 120.0  # seconds without asking for executors after failures


class Warmer(Protocol):
    """What the allocator tells of new executors (:class:`tidal.spark.cluster.warm.ExecutorWarmer`)."""

    def joined(self, cores: int) -> None: ...

    def stop(self) -> None: ...


def _local_hosts() -> set[str]:
    hosts = {"127.0.0.1", "localhost", "::1", os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    try:
        hosts.add(socket.gethostname())
        hosts.add(socket.getfqdn())
        hosts.update(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    return hosts


class ExecutorAllocator:
    def __init__(
        self,
        executors: Any,
        bounds: ExecutorBounds,
        replicas: Callable[[], Mapping[str, int]],
        log_path: str | Path,
        *,
        backend: str = "sqlite",
        db: str = "",
        interval: float = 0.5,
        clock: Callable[[], float] = time.time,
        failures: StartFailures | None = None,
        publish: Callable[[Mapping[str, int]], None] | None = None,
        warmer: Warmer | None = None,
    ) -> None:
        self._executors = executors
        self.bounds = bounds
        self._replicas = replicas
        self.path = Path(log_path)
        self._backend = backend
        self._db = db
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.requested = 0
        self.error: errors.ClusterError | None = None
        self._ready: dict[str, int] = {}
        self._idle: set[str] = set()  # the vertices idle at the last look (their replicas need no core)
        self._publish = publish  # the slots to the control record (admission caps by them)
        self._warmer = warmer  # warms executors as they register (tidal.spark.cluster.warm), or None
        self._published: dict[str, int] | None = None
        self._shrink_since: float | None = None
        self._last_written: tuple[str, int] | None = None
        self._count: tuple[int, int] | None = None
        self._asked: collections.deque[float] = collections.deque()  # request times not yet served
        self._seen: dict[str, tuple[float, float]] = {}  # id → (requested at, registered at)
        self._started: set[str] = set()  # ids whose first task is done
        self._killing: dict[str, float] = {}  # id → when it was killed (gone from the list ~5 s later)
        self._listed: dict[str, str] = {}  # id → host, at the last look
        self.lost = 0  # executors that went away without being killed here (a host lost, a crash)
        self._local = _local_hosts()
        self._began = clock()
        self._failures = failures  # executors dead before registering (a standalone cluster's workers)
        self._looked_at = 0.0
        self._backoff_until: float | None = None
        self._backoff_why = ""
        self._next_backoff = BACKOFF_FIRST
        # Per vertex, for how long it has had nothing to do (the controller's ``idle_for``, set
        # once the controller exists): an idle vertex's replicas need no executor.
        self.idle_for: Callable[[float], Mapping[str, float]] | None = None
        # What the sinks delivered and what is pending, at the controller's last tick (its
        # ``progress``): whether one more executor pays.
        self.progress: Callable[[], tuple[float, float, float] | None] | None = None
        self._payoff = ExecutorPayoff()
        self._last_payoff: tuple[tuple[int, ...], int | None] = ((), None)  # the last payoff record's

    # -- the loop ------------------------------------------------------------------------------

    def start(self) -> ExecutorAllocator:
        now = self._clock()
        self.requested = self.bounds.needed(sum(self._replicas().values()))
        self._asked.extend([now] * self.requested)
        self._executors.request_total(self.requested)
        self._thread = threading.Thread(target=self._run, name="tidal-executors", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.tick(self._clock())
            except Exception as exc:  # the allocator must not die of one failed call
                if self._stop.is_set():
                    return
                log.warning("executor allocator: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._warmer is not None:
            self._warmer.stop()
        if self._publish is not None and self._published:
            self._publish({})  # no cap left behind for the next run of this directory
            self._published = None
        self._write_count(self._clock(), force=True)

    def registered_count(self) -> tuple[int, int] | None:
        """(executors, cores) registered at the last look; None before the first."""
        with self._lock:
            return self._count

    def ready(self) -> dict[str, int]:
        """Each vertex's replicas that have a core now (for the probe)."""
        with self._lock:
            return dict(self._ready)

    def attainable(self) -> dict[str, int]:
        """Each vertex's replicas that could have a core at all: its share of the most cores
        the bounds allow (``maxExecutors × executorCores``). More are never ready (for the probe).
        Of the replicas set now, not at the last look: the controller's next tick asks, and a
        share of the count before its change would call a scale-up ready at once."""
        wanted = dict(self._replicas())
        with self._lock:
            idle = {n for n in self._idle if n in wanted}
        return ready_slots(wanted, self.bounds.max * self.bounds.cores, idle)

    def tick(self, now: float) -> ExecutorDecision:
        wanted = dict(self._replicas())
        listed = self._executors.registered()
        self._check_hosts(listed)
        self._observe(now, listed)
        ids = {e.id for e in listed}
        self._notice_lost(now, ids)
        self._listed = {e.id: e.host for e in listed}
        self._killing = {i: t for i, t in self._killing.items() if i in ids and now - t < KILL_TIMEOUT}
        executors = [e for e in listed if e.id not in self._killing]  # a killed one is on its way out
        quiet = self.idle_for(now) if self.idle_for is not None else {}
        idle = {n: r for n, r in wanted.items() if r > 0 and quiet.get(n, 0.0) >= self.bounds.idle_seconds}
        ready = ready_slots(wanted, sum(e.cores for e in executors), idle)
        with self._lock:
            self._ready = ready
            self._idle = set(idle)
        if self._publish is not None and ready != self._published:
            self._publish(ready)
            self._published = ready
        self._notice_failed_starts(now)
        payoff = self._judge_payoff(now, sum(wanted.values()) - sum(idle.values()), len(executors))
        decision = decide_executors(
            now, sum(wanted.values()), executors, self.requested, self.bounds, self._shrink_since,
            self._backoff_until, self._backoff_why, idle, payoff,
        )  # fmt: skip
        wants_fewer = decision.target < len(executors)
        self._shrink_since = (self._shrink_since or now) if wants_fewer else None
        if decision.kill:
            decision = self._kill(now, decision)
        if decision.target != self.requested or decision.kill:
            self._executors.request_total(decision.target)
            if decision.target > self.requested:
                missing = decision.target - len(executors) - len(self._asked)
                self._asked.extend([now] * max(0, missing))
            self.requested = decision.target
        while len(self._asked) > max(0, decision.target - len(executors)):
            self._asked.pop()  # asked for fewer again before they came
        self._record(decision)
        return decision

    def _kill(self, now: float, decision: ExecutorDecision) -> ExecutorDecision:
        """Kill the decision's executors: the idle ones unforced, so that Spark keeps one given a
        task since the status store listed it idle (tried again at the next tick), and the
        busy ones forced (:meth:`SparkExecutors.kill`). The decision says which were kept."""
        idle = [i for i in decision.kill if i not in decision.forced]
        killed = self._executors.kill(idle, force=False) if idle else []
        if decision.forced:
            killed += self._executors.kill(list(decision.forced), force=True)
        self._killing.update(dict.fromkeys(killed, now))
        kept = [i for i in decision.kill if i not in killed]
        if kept:
            ids = ", ".join(kept)
            why = (
                f"; {ids} kept: Spark killed no executor running a task (given one since it was "
                "listed idle), or the cluster manager did not acknowledge; again at the next look"
            )
            decision = dataclasses.replace(decision, reason=decision.reason + why)
        log.info("%s", decision.reason)
        return decision

    # -- what it watches -----------------------------------------------------------------------

    def _judge_payoff(self, now: float, working: int, registered: int) -> Payoff | None:
        """Whether one more executor pays, from what the controller saw at its last tick
        (:class:`~tidal.scaling.executor_payoff.ExecutorPayoff`); ``None`` when it is off."""
        if self.progress is None or self.bounds.payoff == 0:
            return None
        self._payoff.payoff = self.bounds.payoff  # a live edit of the bounds takes effect here
        seen = self.progress()
        if seen is not None:
            at, delivered, pending = seen
            self._payoff.observe(
                at, registered, delivered, pending, self.bounds.needed(working) >= registered
            )
        judged = self._payoff.judge(now)
        key = (tuple(k for k, _, _ in judged.rates), judged.cap)
        if key != self._last_payoff:  # a count measured for the first time, or the cap changed
            self._last_payoff = key
            rates = {str(k): rate for k, rate, _ in judged.rates}
            self._append({"kind": "payoff", "at": now, "delivered_per_executors": rates, "cap": judged.cap})
        return judged

    def _check_hosts(self, executors: list[Executor]) -> None:
        if self._backend != "sqlite" or self.error is not None:
            return
        for e in executors:
            if e.host and e.host not in self._local:
                self.error = errors.ClusterError(
                    f"executor {e.id} runs on host {e.host}, not on the driver's: SQLite buffers are one "
                    f"file on the driver's disk ({self._db}) that tasks there cannot open. Use "
                    "`buffers: {backend: jetstream}` (NATS JetStream) for executors on other hosts."
                )
                log.error("%s", self.error)
                return

    def _observe(self, now: float, executors: list[Executor]) -> None:
        """Start-ups: registered (Spark's add time) and first task done (observed here); the
        warmer told of new ones."""
        joined = False
        for e in executors:
            if e.id not in self._seen:
                joined = True
                asked = self._asked.popleft() if self._asked else self._began
                self._seen[e.id] = (asked, e.added_at or now)
                self._next_backoff = BACKOFF_FIRST  # one started: the next failure is news again
            if e.id not in self._started and e.completed_tasks > 0:
                self._started.add(e.id)
                asked, registered = self._seen[e.id]
                self._append(
                    {
                        "kind": "startup",
                        "id": e.id,
                        "host": e.host,
                        "requested_at": asked,
                        "registered_at": registered,
                        "first_task_at": now,
                        "registered_after": round(max(0.0, registered - asked), 2),
                        "first_task_after": round(max(0.0, now - asked), 2),
                    }
                )
                log.info(
                    "executor %s started: registered %.1f s after the request, first task done after %.1f s",
                    e.id, max(0.0, registered - asked), max(0.0, now - asked),
                )  # fmt: skip
        self._write_count(now, len(executors), sum(e.cores for e in executors))
        if joined and self._warmer is not None:
            self._warmer.joined(sum(e.cores for e in executors))

    def _notice_failed_starts(self, now: float) -> None:
        """Executors that died before registering: an event with their own last words, and a
        back-off (5 s, doubling to 2 min) in which no more are asked for."""
        if self._failures is None or now - self._looked_at < FAILURES_EVERY:
            return
        self._looked_at = now
        try:
            failed = self._failures.new(self._seen.keys())
        except (OSError, ValueError) as exc:  # the master's UI did not answer: look again later
            log.debug("executor start failures: %s", exc)
            return
        if not failed:
            return
        if self._backoff_until is not None and now < self._backoff_until:
            # Launched before the back-off began: the same round, not news.
            log.debug("%d more executors of the last round failed to start", len(failed))
            return
        delay, self._next_backoff = self._next_backoff, min(self._next_backoff * 2, BACKOFF_MAX)
        self._backoff_until = now + delay
        hosts = sorted({f.worker for f in failed})
        where = ", ".join(hosts)
        self._backoff_why = f"{len(failed)} exited before registering, on {where}: {failed[-1].words}"
        self._append({"kind": "start failed", "at": now, "count": len(failed), "hosts": hosts,
                      "reason": self._backoff_why, "retry_in": delay})  # fmt: skip
        log.warning("executors failed to start (%s); asking for no more for %.0f s", self._backoff_why, delay)

    def _notice_lost(self, now: float, ids: set[str]) -> None:
        """An executor gone that was not killed here was lost: its host died, its JVM crashed, or
        its worker went away. Recorded with Spark's reason; Spark runs its tasks again elsewhere,
        and the next tick asks for a replacement while the replicas still need it."""
        gone = [i for i in self._listed if i not in ids and i not in self._killing]
        if not gone:
            return
        reasons = self._executors.removed()
        for i in gone:
            self.lost += 1
            reason = reasons.get(i, "no longer listed")
            host = self._listed[i]
            self._append({"kind": "lost", "at": now, "id": i, "host": host, "reason": reason})
            log.warning("executor %s on host %s lost: %s", i, host, reason)

    # -- the log -------------------------------------------------------------------------------

    def _append(self, record: dict[str, Any]) -> None:
        with self._lock, self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")

    def _write_count(
        self, now: float, executors: int | None = None, cores: int | None = None, force: bool = False
    ) -> None:
        if executors is None or cores is None:
            if self._count is None:
                return
            executors, cores = self._count
        if force or self._count != (executors, cores):
            with self._lock:
                self._count = (executors, cores)
            self._append({"kind": "count", "at": now, "executors": executors, "cores": cores})

    def _record(self, decision: ExecutorDecision) -> None:
        key = (str(decision.rule), decision.target)
        if decision.changed or key != self._last_written:
            self._last_written = key
            self._append({"kind": "decision", **decision.to_dict()})
            if decision.changed and decision.rule is not ExecutorRule.SHRINK:
                log.info("%s", decision.reason)


def read_executor_log(where: str | Path) -> dict[str, list[dict[str, Any]]]:
    """``executors.jsonl`` (``where`` is the file or its run directory) by kind: ``decision``,
    ``startup``, ``count``, ``lost``, ``payoff`` (the executor counts measured, when one is
    measured for the first time or the cap changes)."""
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in ("decision", "startup", "count", "lost", "payoff")}
    path = Path(where)
    if path.is_dir():
        path = path / "executors.jsonl"
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # a line cut short by a kill
            continue
        out.setdefault(record.get("kind", ""), []).append(record)
    return out


def start_allocator(
    spark: Any, spec: Any, control_spec: Any, control: Any, run_dir: Path, db: str, master_web: str | None
) -> ExecutorAllocator:
    """The allocator of a run on a cluster manager: ``cluster:``'s bounds, over the replicas the
    controller sets for the vertices of ``control_spec`` that run as tasks (an HTTP source's
    replicas are receiver processes, not tasks: no executors). With the standalone master's web
    UI (``master_web``), executors that die before registering are found on its workers."""
    from tidal.spark.cluster.session import take_over_executors
    from tidal.spark.cluster.warm import ExecutorWarmer, step_modules
    from tidal.spec.graph import http_sources

    served = set(http_sources(spec))
    vertices = {v.name: v.replicas for v in control_spec.vertices if v.name not in served}
    take_over_executors(spark)
    c = spec.cluster
    bounds = ExecutorBounds.of(c)

    def replicas() -> dict[str, int]:
        return {n: control.replicas(n, default=start) for n, start in vertices.items()}

    return ExecutorAllocator(
        SparkExecutors(spark),
        bounds,
        replicas,
        run_dir / "executors.jsonl",
        backend=spec.buffers.backend,
        db=db,
        failures=StartFailures(master_web, spark.sparkContext.applicationId) if master_web else None,
        publish=control.set_slots,
        warmer=ExecutorWarmer(spark, step_modules(spec)).start() if c.warm_executors else None,
    ).start()
