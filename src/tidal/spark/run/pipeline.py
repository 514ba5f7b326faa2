"""Run a pipeline on Spark: buffers, one query per vertex, the controller, until told to stop.

One Spark application per pipeline. Every vertex is a Structured Streaming query
(:func:`~tidal.spark.query.vertex.start_vertex`) in its own FAIR pool, with its checkpoint under the
run directory; the controller (:mod:`tidal.controller`) runs in a thread of this process and
writes replicas to the control record the queries' readers consult.

The run directory holds everything a restart needs: ``pipeline.db`` (the SQLite buffers and
the control record), ``checkpoints/<vertex>`` (Spark's offsets and commits) and ``events.jsonl``
(every decision with its reason). Starting again on the same directory resumes where the
queries left off, after a clean stop as after a SIGKILL: nothing is lost or doubled.

A query that fails (a UDF that raised past its retries with no dead letter) stops the pipeline
with :class:`~tidal.errors.PipelineError`, which names the vertex, the message id and the
exception. Its input is not committed, so fixing the UDF and starting again resumes from there.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidal.controller import Controller, EventLog
from tidal.controller.faults import FAULTS_FILE, FaultLog
from tidal.controller.replicas import seed_replicas
from tidal.isb.base import BufferStore
from tidal.isb.control import ControlStore
from tidal.isb.durability import start_warnings
from tidal.scaling import Decision, Rule
from tidal.scaling.latency import DelaySample
from tidal.spark.batch import rundir, side_input_relay
from tidal.spark.batch.checkpoint_sync import checkpoint_of, repair_checkpoint
from tidal.spark.batch.config import QueryConfig, input_buffer
from tidal.spark.batch.driver_lock import DriverLock
from tidal.spark.batch.stores import open_store
from tidal.spark.cluster.standalone import default_master_web, master_cores
from tidal.spark.query.queries import query_config
from tidal.spark.query.vertex import ROCKSDB, past_start, start_vertex
from tidal.spark.run.buffer_watch import start_buffer_watch
from tidal.spark.run.controller_setup import build_controller
from tidal.spark.run.partition_scaler import PartitionScaler, start_partition_scaler
from tidal.spark.run.repartition import StatePartitions
from tidal.spark.run.restarts import QueryFailures
from tidal.spark.run.shuffle_follower import ShuffleFollower
from tidal.spark.run.status import StatusThroughOutages, VertexStatus, write_status_file
from tidal.spark.run.teardown import drained, stop_in_order
from tidal.spark.run.vertical import VerticalWatch
from tidal.spark.sinks.connector import repair_sinks
from tidal.spec import PipelineSpec, graph
from tidal.spec.chains import folded, plan_chains

if TYPE_CHECKING:
    from tidal.request.path import RequestPath
    from tidal.spark.run.side_inputs import SideInputManager

__all__ = ["PipelineRun", "VertexStatus"]

log = logging.getLogger("tidal.pipeline")

WARM_UP_LIMIT = 60.0  # seconds after which the controller decides even if a query ran no batch


class PipelineRun:
    """``PipelineRun(spec, run_dir).start()`` … ``wait()`` … ``stop()`` (or use it as a context)."""

    def __init__(
        self,
        spec: PipelineSpec,
        run_dir: str | Path,
        *,
        spark: Any = None,
        master: str = "local[2]",
        dry_run: bool = False,
        trigger_seconds: float | None = None,
        buffers_url: str | None = None,
        own_spark: bool | None = None,
        master_web: str | None = None,
    ) -> None:
        """``spark``: a session to run in (one is built otherwise); ``own_spark``: whether this run
        stops it when it stops (by default, only the one it built); ``master_web``: a standalone
        master's web UI (Spark's default port on the master's host otherwise)."""
        self.spec = spec
        # Adjacent vertices on one-to-one edges run as one query (tidal.spec.chains); the
        # controller scales each chain as one vertex, its head.
        self.plan = plan_chains(spec)
        self.control_spec = folded(spec, self.plan)
        # Absolute: executors run in their own working directories (a relative one: another db).
        self.run_dir = Path(run_dir).absolute()
        self.db = self.run_dir / "pipeline.db"
        self.dry_run = dry_run
        # The spec's limits.triggerSeconds unless the caller (a test, a benchmark) says otherwise.
        self.trigger_seconds = spec.limits.trigger_seconds if trigger_seconds is None else trigger_seconds
        self._spark = spark
        self._own_spark = spark is None if own_spark is None else own_spark
        self._master = master
        self._web_given = master_web  # checked: its silence is an error (a default is not)
        self.master_web = master_web or default_master_web(master)
        self._url = buffers_url or spec.buffers.url
        self._nats: Any = None
        self.queries: dict[str, Any] = {}
        self._configs: dict[str, Any] = {}  # each query's configuration and planned frame, to start
        self._frames: dict[str, Any] = {}  # it again after a transient failure (tidal.spark.run.restarts)
        self._failures = QueryFailures(self._restart)  # restarts what failed for the machine's reasons
        self._statuses = StatusThroughOutages()  # the last status, kept while the buffers are away
        self.controller: Controller | None = None
        self.control: ControlStore | None = None
        self.buffers: BufferStore | None = None
        self.started_at = 0.0
        self._released = False
        self._lock: DriverLock | None = None  # held from start to stop (one driver per run directory)
        self.allocator: Any = None  # the executor allocator, on a cluster manager
        # What stops with the run: reference tables read again on their intervals, the buffer
        # servers' watch (a replica unheard: a fault).
        self.threads: list[Any] = []
        self.requests: dict[str, RequestPath] = {}  # an HTTP source's request path, by vertex
        # A spec the control API asked the run to restart with (tidal apply --restart): the
        # runner drains this run and starts another with it (tidal.cli.run).
        self.restart_requested: PipelineSpec | None = None
        # Memory and cores per replica, per query (VPA's recommender): shown, not applied.
        self.side_inputs: SideInputManager | None = None  # the retrievers' thread (spec.sideInputs)
        self.vertical = VerticalWatch([v.name for v in self.control_spec.vertices])
        self.partitions: StatePartitions | None = None  # the reduce vertices' state partitions and moves
        self.partition_scaler: PartitionScaler | None = None
        self.shuffles: ShuffleFollower | None = None  # the steps' shuffle partitions follow their replicas

    @property
    def on_cluster(self) -> bool:
        return self._master.startswith("spark://")

    @property
    def starts_per_tick(self) -> int | None:
        """How many new replicas of a vertex ``policy: tidal`` starts a tick: in local mode every
        replica's Python worker starts on this machine, so as many as it has cores; elsewhere
        executors bring their own cores, so all at once (``None``)."""
        return (os.cpu_count() or 1) if self._master.startswith("local") else None

    def cores_allowed(self) -> tuple[int, str]:
        """The most cores the run can have, and where that comes from (:func:`master_cores`)."""
        return master_cores(self._master, self.spec.cluster)

    # -- set-up --------------------------------------------------------------------------------

    def _open_buffers(self) -> BufferStore:
        buffers, external = self.spec.buffers, self._url
        if buffers.backend == "jetstream" and self._url is None:  # no server given: start one for this run
            from tidal.isb.natsd import NatsServer

            self._nats = NatsServer(self.run_dir / "nats", sync=buffers.durability == "sync").start()
            self._url = self._nats.url
        for warning in start_warnings(buffers, self.run_dir, external):
            log.warning("%s", warning)
        return open_store(
            buffers.backend, db=str(self.db), pipeline=self.spec.name, url=self._url,
            replicas=buffers.replicas, durability=buffers.durability,
        )  # fmt: skip

    def query_config(self, vertex: str) -> QueryConfig:
        """What the query of ``vertex`` (a chain's head) needs to know."""
        return query_config(
            self.spec, self.plan, vertex, db=str(self.db), run_dir=str(self.run_dir), url=self._url
        )

    def start(self) -> PipelineRun:
        self._lock = DriverLock(self.run_dir).acquire()  # refuses a second driver on this directory
        try:
            return self._start()
        except BaseException:
            self._lock.release()  # a start that failed holds nothing: fix it and start again
            raise

    def _start(self) -> PipelineRun:
        rundir.claim(self.run_dir, self.spec)  # refuses another pipeline's run directory
        for mended in repair_sinks(self.spec, self.run_dir):  # before anything can refuse the run
            log.warning("%s", mended)
        self.started_at = time.time()
        self.buffers = self._open_buffers()
        self.control = ControlStore(self.db, self.spec.buffers.durability)
        self.control.set_slots({})  # a cluster's allocator sets them again; a local run has none
        owned = [(b, v.name) for v in self.control_spec.vertices if (b := input_buffer(v)) is not None]
        made = [b for b, _ in owned]
        for name, reader in owned:  # a chain's followers have no buffer; a buffer has its reader's limits
            limits = self.spec.limits_of(reader).buffer
            self.buffers.create(name, limits).verify()  # a crash's damage refused before any read
        watch = start_buffer_watch(self.buffers, self.spec, made, FaultLog(self.run_dir / FAULTS_FILE))
        self.threads = [watch] if watch is not None else []
        seed_replicas(self.control, [(v.name, v.replicas) for v in self.control_spec.vertices])
        for v in self.control_spec.vertices:
            if v.source is not None:  # the last stop closed it; a paused run stays closed
                self.control.set_closing(v.name, self.control.phase() != "Running")
        configs = {v.name: self.query_config(v.name) for v in self.control_spec.vertices}
        initial = {name: self.spec.vertex(name).partitions or 1 for name, c in configs.items() if c.reduce}
        self.partitions = StatePartitions(
            self.run_dir, initial, self.control, EventLog(self.run_dir / "events.jsonl")
        )
        if self.spec.side_inputs:  # a retriever that cannot be imported stops the start here
            from tidal.spark.run.side_inputs import SideInputManager

            self.side_inputs = SideInputManager(self.spec, self.run_dir)
            if side_input_relay.relayed(self.spec):  # a reduce's handler runs after a shuffle
                self.side_inputs.relay = side_input_relay.SideInputRelay(self.buffers).publish
                self.side_inputs.republish()  # before any query plans a batch
        for line in self.plan.describe():
            log.info("chaining: %s", line)
        if self._spark is None:
            from tidal.spark.cluster.session import pipeline_session

            self._spark = pipeline_session(self.spec, self._master, self._web_given)
        if self.on_cluster:
            from tidal.spark.cluster.executors import start_allocator

            assert self.control is not None
            self.allocator = start_allocator(
                self._spark, self.spec, self.control_spec, self.control, self.run_dir, str(self.db),
                self.master_web,
            )  # fmt: skip
        from tidal.spark.query.datasource import register

        register(self._spark)
        from tidal.spark.query.frames import plan_steps

        # A step's SQL or schema error stops the run here, before any query starts.
        frames, refreshers = plan_steps(self._spark, configs)
        self.threads.extend(refreshers)
        self.shuffles = ShuffleFollower(
            self, [n for n in frames if not configs[n].reduce], EventLog(self.run_dir / "events.jsonl"),
            replicas=self._replicas,
        )  # fmt: skip
        from tidal.spark.sources.http import start_request_path

        served = set(graph.http_sources(self.spec))  # request paths, not queries
        # Downstream first: a vertex's reader is up before anything is written into its buffer.
        for name in reversed(list(configs)):
            if name in served:
                self.requests[name] = start_request_path(
                    self.spec, configs[name], self.control, self.run_dir, on_poke=self._poke
                )
                continue
            self._configs[name], self._frames[name] = configs[name], frames.get(name)
            self.queries[name] = self._start_query(name)
        self.controller = build_controller(self)
        if self.side_inputs is not None:  # its vertices wait for the first values
            self.side_inputs.events = EventLog(self.run_dir / "events.jsonl")  # its own: news=True
            self.side_inputs.replicas = functools.partial(self.control.replicas, default=0)
            self.side_inputs.start()
        if self.allocator is not None:  # an idle vertex's replicas hold no executor
            self.allocator.idle_for = self.controller.idle_for
            self.allocator.progress = self.controller.progress  # does one more executor pay?
        self.controller.start(ready=None if self.controller.resumed else self.warm)
        self.partition_scaler = start_partition_scaler(self)  # statePartitions: moves by itself
        self.shuffles.paused = lambda: bool(self.controller and self.controller.paused)
        self.shuffles.start(lambda: float(self.spec.controller.interval_seconds))
        log.info(
            "pipeline %s running: %d vertices in %d queries, run directory %s%s",
            self.spec.name,
            len(self.spec.vertices),
            len(configs),
            self.run_dir,
            " (dry run: decisions are not applied)" if self.dry_run else "",
        )
        return self

    # -- while it runs -------------------------------------------------------------------------

    def warm(self) -> bool:
        """Every query is past its start (it ran a micro-batch, or its first trigger found no data
        and it now waits for some), or failed: Spark's warm-up is over. Until then the controller
        does not decide, so warm-up is not mistaken for an idle pipeline. After
        ``WARM_UP_LIMIT`` seconds it decides anyway."""
        if time.time() - self.started_at > WARM_UP_LIMIT:
            return True
        return all(past_start(q) for q in self.queries.values())

    def executors(self) -> tuple[int, int] | None:
        """(executors, cores) registered now on a cluster manager; None in local mode."""
        return None if self.allocator is None else self.allocator.registered_count()

    def _poke(self) -> None:
        if self.controller is not None:
            self.controller.poke()

    def running(self, vertex: str) -> bool:
        vertex = self.plan.head_of(vertex)  # a chained vertex runs in its head's query
        if vertex in self.requests:
            return self.requests[vertex].running()
        query = self.queries.get(vertex)
        return query is not None and query.isActive

    def check(self) -> None:
        """Raise :class:`~tidal.errors.PipelineError` if a vertex's query failed (or the
        executor allocator found a cluster the pipeline cannot run on)."""
        if self.allocator is not None and self.allocator.error is not None:
            raise self.allocator.error
        self._failures.check(self.queries)

    def _start_query(self, name: str) -> Any:
        config = self._configs[name]
        for mended in repair_checkpoint(checkpoint_of(self.run_dir, name)):
            log.warning("vertex %s: %s", name, mended)
        partitions, conf = None, None
        if config.reduce and self.partitions is not None:  # a move a killed driver left half done
            self.partitions.prepare(self._spark, name, self._replicas(name))
            partitions = self.partitions.count(name)
        elif self.shuffles is not None and name in self.shuffles.steps:  # a step: its replicas' count
            partitions, conf = self.shuffles.count(name), self.shuffles.conf
        return start_vertex(
            self._spark,
            config,
            checkpoint_of(self.run_dir, name),
            trigger_seconds=self.trigger_seconds,
            frame=self._frames.get(name),
            shuffle_partitions=partitions,
            state_store=ROCKSDB if config.reduce else None,
            conf=conf,
        )

    def _replicas(self, name: str) -> int:
        return (
            0
            if self.control is None
            else self.control.replicas(name, default=self.spec.vertex(name).replicas)
        )

    def move_partitions(self, name: str, partitions: int, by: str) -> Any:
        """Move the reduce vertex ``name``'s state to ``partitions`` partitions while the run goes
        on (:mod:`tidal.spark.run.repartition`); the :class:`~tidal.spark.run.repartition.Move`."""
        assert self.partitions is not None

        return self.partitions.move(
            name, partitions, spark=self._spark, query=lambda: self.queries[name],
            start=lambda: self.start_again(name),
            replicas=self._replicas(name), by=by,
        )  # fmt: skip

    def start_again(self, name: str) -> Any:
        """Start ``name``'s query again from its checkpoint (stopped first if it still runs)."""
        with contextlib.suppress(Exception):
            self.queries[name].stop()
        self.queries[name] = self._start_query(name)
        return self.queries[name]

    def _restart(self, name: str, why: str, attempt: int) -> None:
        """Start ``name``'s failed query again from its checkpoint, with an event saying why."""
        self.start_again(name)
        log.warning("vertex %s: %s", name, why)
        if self.controller is not None and self.control is not None:
            replicas = self.control.replicas(name, default=self.spec.vertex(name).replicas)
            note = Decision(name, time.time(), replicas, replicas, Rule.RESTARTED, why, {"attempt": attempt})
            self.controller.events.record(note)

    def wait(
        self,
        duration: float | None = None,
        *,
        until: Callable[[], bool] | None = None,
        every: Callable[[PipelineRun, list[VertexStatus]], None] | None = None,
        poll: float = 0.5,
    ) -> None:
        """Block until ``duration`` seconds passed or ``until()`` is true (or forever), checking
        the queries; ``every(self, statuses)`` runs at every poll (the live view)."""
        deadline = None if duration is None else time.monotonic() + duration
        while True:
            self.check()
            statuses = self.status()
            self.write_status(statuses=statuses)
            if every is not None:
                every(self, statuses)
            if until is not None and until():
                return
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(poll)

    def status(self) -> list[VertexStatus]:
        return self._statuses.read(self)

    def delivered_delays(self, vertex: str, since: float) -> list[DelaySample]:
        """The delivery delays of the sink ``vertex``'s batches committed at or after ``since``."""
        return [] if self.control is None else self.control.delays(vertex, since)

    def write_status(self, state: str = "running", statuses: list[VertexStatus] | None = None) -> None:
        """``status.json`` in the run directory, for ``tidal status`` from another terminal."""
        write_status_file(self, state, self.status() if statuses is None else statuses)

    # -- tear-down -----------------------------------------------------------------------------

    def drained(self) -> bool:
        """Every buffer is empty (sources stopped: nothing new arrives) and no query is mid-batch."""
        return drained(self)

    def stop(self, *, drain: bool = False, drain_timeout: float = 300.0, keep_spark: bool = False) -> Any:
        """Stop in order (:mod:`tidal.spark.run.teardown`): the sources' queries first (nothing
        new enters), then — with ``drain`` — wait until every buffer is empty (the controller
        keeps scaling meanwhile, so a vertex at zero wakes for what is left), then the
        controller, then every other query between two micro-batches, and only then the final
        status, counted from what the batches committed. Idempotent: a second call (a second
        Ctrl-C) stops at once and still writes the status. ``keep_spark``: leave the Spark
        session running and return it (for the next spec)."""
        if self._released:
            return None
        stop_in_order(self, drain=drain, drain_timeout=drain_timeout)
        session = self._spark if keep_spark else None
        if keep_spark:
            self._own_spark = False
        self._release()
        return session

    def _release(self) -> None:
        """Stop Spark and what this run started; close the stores."""
        for path in self.requests.values():
            path.stop()
        if self._spark is not None and self._own_spark:
            self._spark.stop()
            self._spark = None
        if self.buffers is not None:
            self.buffers.close()
        if self.control is not None:
            self.control.close()
        if self._nats is not None:
            self._nats.stop()
            self._nats = None
        if self._lock is not None:
            self._lock.release()
        self._released = True

    def __enter__(self) -> PipelineRun:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
