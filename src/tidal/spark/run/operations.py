"""Operating a running pipeline from outside: scale a vertex, pause and resume, retune it live.

What :mod:`tidal.api.server` serves, done to a :class:`~tidal.spark.run.pipeline.PipelineRun`:

- **Scale** (Numaflow's scale subresource): a write sets the vertex's replicas in the control
  record, which its reader takes at the next micro-batch (and the executor allocator at its next
  tick), and is an event naming who wrote it. With ``scale.disabled`` the count stays until the
  next write; with autoscaling on, the write counts as the vertex's last scaling, so the
  autoscaler continues from it once the cooldown has passed. A count outside ``[min, max]`` is
  refused naming both; a chained vertex has no replicas of its own (its head's query runs it).
- **Pause** (Numaflow's ``lifecycle.desiredPhase: Paused``): the sources admit nothing more,
  the buffers drain (unless asked not to), then every vertex goes to 0 replicas and the executors
  are released; sources keep their positions (checkpoints, staging buffers, Kafka offsets), so
  **resume** continues where the pause stopped, with the replicas each vertex had. The phase
  (``Running``, ``Pausing``, ``Paused``) is kept in the control record: a run started again on a
  paused directory stays paused.
- **Live edits** (``tidal apply``): scale blocks, ``policy`` and ``kpa``, the ``controller``
  settings, the cluster's executor bounds and ``limits.readBatchSize`` take effect at once;
  anything that changes what the pipeline computes or how its state is laid out (vertices,
  edges, sources, UDFs, sinks, chains, buffer limits, the trigger) needs a restart, and is
  refused naming each field.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from tidal.api.auth import Caller
from tidal.api.partitions import PartitionsView, check_partitions
from tidal.api.scale import ApiError, ScaleView, check_bounds
from tidal.scaling import Rule
from tidal.spark.batch.config import input_buffer
from tidal.spec import PipelineSpec, edits, numaflow_scale
from tidal.spec.chains import folded, plan_chains
from tidal.spec.kpa import kpa_spec

if TYPE_CHECKING:
    from tidal.spark.run.pipeline import PipelineRun

__all__ = ["RunOperations"]

log = logging.getLogger("tidal.operations")

PAUSED_REPLICAS_KEY = "lifecycle:replicas"


class RunOperations:
    """The operations on one running pipeline (:class:`~tidal.api.server.Operable`)."""

    def __init__(self, run: PipelineRun) -> None:
        self.run = run
        self._busy = threading.Lock()  # one lifecycle change or edit at a time
        assert run.control is not None and run.controller is not None
        self.control = run.control
        self.controller = run.controller
        self._bounds = run.allocator.bounds if run.allocator is not None else None
        if self.phase() in ("Paused", "Pausing"):  # a run started again on a paused directory stays paused
            self._hold_paused()

    # -- reading -------------------------------------------------------------------------------

    @property
    def pipeline(self) -> str:
        return self.run.spec.name

    def phase(self) -> str:
        return self.control.phase()

    def _bounds_of(self, vertex: str) -> tuple[int, int, bool]:
        v = self.run.control_spec.vertex(vertex)
        if self.run.control_spec.policy_of(vertex) == "kpa" or vertex in self.run.requests:
            kpa = kpa_spec(v)
            return kpa.min_scale, kpa.max_scale if kpa.max_scale > 0 else 2**31 - 1, True
        scale = numaflow_scale(v.scale, vertex)
        return scale.min, scale.max, not scale.disabled

    def scale(self, vertex: str) -> ScaleView:
        names = [v.name for v in self.run.spec.vertices]
        if vertex not in names:
            raise ApiError(
                404, "NotFound", f"vertex {vertex!r} is not in pipeline {self.pipeline} ({', '.join(names)})"
            )
        head = self.run.plan.head_of(vertex)
        low, high, autoscaling = self._bounds_of(head)
        replicas = self.control.replicas(head, default=self.run.control_spec.vertex(head).replicas)
        return ScaleView(
            pipeline=self.pipeline,
            vertex=vertex,
            replicas=replicas,
            running=self.control.ready_replicas(head, replicas),
            version=self.control.replicas_version(head),
            low=low,
            high=high,
            autoscaling=autoscaling,
            head=None if head == vertex else head,
        )

    def scales(self) -> list[ScaleView]:
        return [self.scale(v.name) for v in self.run.spec.vertices]

    def spec_document(self) -> dict[str, Any]:
        """The running spec as the API shows it (Numaflow's field names)."""
        data: dict[str, Any] = json.loads(self.run.spec.model_dump_json(by_alias=True, exclude_none=True))
        return data

    # -- the scale subresource -----------------------------------------------------------------

    def set_scale(
        self, vertex: str, replicas: int, version: str | None, caller: Caller
    ) -> tuple[ScaleView, str]:
        """Apply a write of ``vertex``'s replicas; the new view and what will happen to it."""
        with self._busy:
            view = self.scale(vertex)
            check_bounds(view, replicas)
            if self.phase() != "Running":
                raise ApiError(
                    409,
                    "Conflict",
                    f"pipeline {self.pipeline} is {self.phase()}: resume it first (tidal resume)",
                )
            if version is not None and version != str(view.version):
                raise ApiError(
                    409,
                    "Conflict",
                    f"metadata.resourceVersion {version} is not the current {view.version}: read the Scale "
                    "again and write on top of it (or leave resourceVersion out: the last write wins)",
                )
            after = (
                "autoscaling is on: it continues from this count once the scale-down/up cooldown has passed"
                if view.autoscaling
                else "autoscaling is off (scale.disabled): the count stays until the next write"
            )
            self.controller.external(
                vertex,
                view.replicas,
                replicas,
                time.time(),
                f"set to {replicas} by {caller.describe()}; {after}",
                by=caller.address,
                agent=caller.agent,
                fieldManager=caller.manager,
            )
            return self.scale(vertex), after

    # -- a reduce vertex's state partitions ------------------------------------------------------

    def partitions(self, vertex: str) -> PartitionsView:
        self.scale(vertex)  # 404 for a vertex the pipeline does not have
        mover = self.run.partitions
        reduce = mover is not None and vertex in mover.initial
        cores, where = self.run.cores_allowed()
        return PartitionsView(
            pipeline=self.pipeline,
            vertex=vertex,
            reduce=reduce,
            partitions=mover.count(vertex) if mover is not None and reduce else 0,
            cores=cores,
            where=where,
            moving=mover is not None and mover.moving == vertex,
            retry_in=mover.retry_in(vertex, time.time()) if mover is not None else 0.0,
        )

    def set_partitions(self, vertex: str, partitions: int, caller: Caller) -> tuple[PartitionsView, str]:
        """Move ``vertex``'s state to ``partitions`` partitions; blocks until the vertex runs again.
        A move Spark refused is answered 500 with Spark's reason (the vertex runs on its old count)."""
        with self._busy:  # no pause or edit in the middle of a move
            view = self.partitions(vertex)
            check_partitions(view, partitions)
            if self.phase() != "Running":
                raise ApiError(
                    409,
                    "Conflict",
                    f"pipeline {self.pipeline} is {self.phase()}: resume it first (tidal resume)",
                )
            move = self.run.move_partitions(vertex, partitions, caller.describe())
        if not move.ok:
            raise ApiError(500, "InternalError", f"{vertex}: {move.reason}")
        pause = "" if move.pause is None else f"; the vertex paused {move.pause:.1f} s"
        return self.partitions(
            vertex
        ), f"{vertex}'s state moved from {move.before} to {move.after} partitions{pause}"

    # -- lifecycle -----------------------------------------------------------------------------

    def _sources(self) -> list[str]:
        return [v.name for v in self.run.spec.vertices if v.source is not None]

    def _hold_paused(self) -> None:
        """What a paused run keeps: closed sources, no decisions, no executors beyond what a
        paused run needs (none)."""
        for name in self._sources():
            self.control.set_closing(name, True)
        self.controller.paused = True
        if self.run.allocator is not None and self._bounds is not None:
            self.run.allocator.bounds = dataclasses.replace(self._bounds, min=0)

    def pending(self) -> int:
        """Messages in the run's buffers (what a drain waits for)."""
        assert self.run.buffers is not None
        total = 0
        for v in self.run.control_spec.vertices:
            name = input_buffer(v)
            if name is not None and v.source is None:
                total += int(self.run.buffers.open(name).stats().pending)
        return total

    def pause(self, caller: Caller, *, drain: bool = True, timeout: float = 300.0) -> str:
        """Stop the sources, let the buffers drain (``drain``), scale every vertex to 0 and
        release the executors; blocks until the pipeline is ``Paused``. Returns what happened."""
        with self._busy:
            if self.phase() == "Paused":
                return f"pipeline {self.pipeline} is already paused"
            self.control.set_phase("Pausing")
            for name in self._sources():
                self.control.set_closing(name, True)
            left = ""
            if drain:
                deadline = time.monotonic() + timeout
                while not self.run.drained() and time.monotonic() < deadline:
                    time.sleep(0.2)
                held = self.pending()
                if held:
                    left = (
                        f"; {held:,} messages were still buffered after {timeout:g} s: they stay, and go on "
                        "at resume"
                    )
            with self.controller.held():  # no tick between the last decision and the pause
                self.controller.paused = True
                replicas = {
                    v.name: self.control.replicas(v.name, default=v.replicas)
                    for v in self.run.control_spec.vertices
                }
                self.control.set_meta(PAUSED_REPLICAS_KEY, json.dumps(replicas))
                now = time.time()
                for name, count in replicas.items():
                    self.controller.lifecycle(
                        name, now, Rule.PAUSED, count, 0,
                        f"paused by {caller.describe()}: sources closed"
                        + (", buffers drained" if drain and not left else "") + "; replicas to 0",
                        by=caller.address,
                    )  # fmt: skip
            self._hold_paused()
            self.control.set_phase("Paused")
            message = (
                f"pipeline {self.pipeline} paused" + (" after draining its buffers" if drain else "") + left
            )
            log.info("%s (by %s)", message, caller.describe())
            return message

    def resume(self, caller: Caller) -> str:
        """Open the sources and give every vertex the replicas it had before the pause."""
        with self._busy:
            if self.phase() == "Running":
                return f"pipeline {self.pipeline} is running"
            saved = json.loads(self.control.meta(PAUSED_REPLICAS_KEY) or "{}")
            now = time.time()
            with self.controller.held():
                for v in self.run.control_spec.vertices:
                    count = int(saved.get(v.name, max(1, numaflow_scale(v.scale, v.name).min)))
                    self.controller.lifecycle(
                        v.name, now, Rule.RESUMED, 0, count,
                        f"resumed by {caller.describe()}: {count} replicas", by=caller.address,
                    )  # fmt: skip
                if self.run.allocator is not None and self._bounds is not None:
                    self.run.allocator.bounds = self._bounds
                for name in self._sources():
                    self.control.set_closing(name, False)
                self.controller.paused = False
            self.control.set_phase("Running")
            self.controller.poke()
            log.info("pipeline %s resumed (by %s)", self.pipeline, caller.describe())
            return f"pipeline {self.pipeline} resumed"

    # -- live edits ----------------------------------------------------------------------------

    def generation(self) -> tuple[int, int]:
        """``(metadata.generation, status.observedGeneration)``: the spec's version, bumped by
        every accepted edit, and the version the run runs (behind it while a restart is on)."""
        wanted = int(self.control.meta("spec:generation") or 1)
        return wanted, wanted - (1 if self.run.restart_requested is not None else 0)

    def apply(self, new: PipelineSpec, caller: Caller, *, restart: bool = False) -> list[str]:
        """Apply ``new`` to the running pipeline when only :data:`~tidal.spec.edits.LIVE_FIELDS`
        differ; the changes made, one line each. Otherwise, with ``restart``, ask the run to
        drain and start again with ``new`` (``tidal run`` does it between two waits) when a
        restart can carry the changes; refused (422) naming each field and why, else."""
        from tidal.controller.choose import spec_policies
        from tidal.scaling.executors import ExecutorBounds

        with self._busy:
            old = self.run.spec
            needed = edits.restart_needed(old, new)
            if needed and restart:
                refused = edits.restart_refused(old, new)
                if refused:
                    raise ApiError(
                        422, "Invalid",
                        "a restart on this run directory cannot carry: " + "; ".join(refused)
                        + " (start the changed pipeline in a new --run-dir)",
                    )  # fmt: skip
                if self.run.restart_requested is not None:
                    raise ApiError(409, "Conflict", "a restart is already on its way: wait for it")
                self.run.restart_requested = new
                self.control.set_meta("spec:generation", str(self.generation()[0] + 1))
                log.info(
                    "pipeline %s: restart asked by %s for %s",
                    self.pipeline,
                    caller.describe(),
                    "; ".join(needed),
                )
                return [f"restarting (drain, then start again) for: {line}" for line in needed]
            if needed:
                raise ApiError(
                    422,
                    "Invalid",
                    "these changes need a restart: " + "; ".join(needed)
                    + " (tidal apply --restart drains the pipeline and starts it again with them)",
                )  # fmt: skip
            changes = edits.changes(old, new)
            if not changes:
                return []
            self.control.set_meta("spec:generation", str(self.generation()[0] + 1))
            control_spec = folded(new, plan_chains(new))
            before = {v.name: v for v in self.run.control_spec.vertices}
            pipeline_wide = any(not line.startswith("vertices[") for line in changes)
            keys = ("scale", "policy", "kpa")
            changed = [
                v.name for v in control_spec.vertices
                if pipeline_wide or any(getattr(v, k) != getattr(before[v.name], k) for k in keys)
            ]  # fmt: skip
            policies = spec_policies(
                control_spec, time.time(), self.control.replicas, self.run.requests,
                starts_per_tick=self.run.starts_per_tick,
            )  # fmt: skip
            self.controller.retune(control_spec, changed, policies)
            self.run.spec, self.run.control_spec = new, control_spec
            import yaml  # what the dashboard and a restart read, kept in step with the run

            (self.run.run_dir / "pipeline.yaml").write_text(
                yaml.safe_dump(self.spec_document(), sort_keys=False)
            )
            if new.limits.read_batch_size != old.limits.read_batch_size:
                self.control.set_read_batch_size(new.limits.read_batch_size)
            c = new.cluster
            if self.run.allocator is not None:
                self._bounds = ExecutorBounds.of(c)
                if self.phase() == "Running":
                    self.run.allocator.bounds = self._bounds
            now = time.time()
            for v in control_spec.vertices:
                touched = [
                    line
                    for line in changes
                    if line.startswith(f"vertices[{v.name}]") or not line.startswith("vertices[")
                ]
                if touched:
                    current = self.control.replicas(v.name, default=v.replicas)
                    self.controller.note(
                        v.name, now, Rule.RETUNED, current, current,
                        f"retuned by {caller.describe()}: " + "; ".join(touched), by=caller.address,
                    )  # fmt: skip
            log.info("pipeline %s retuned by %s: %s", self.pipeline, caller.describe(), "; ".join(changes))
            return changes
