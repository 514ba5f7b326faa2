"""Stopping a run in the order that loses nothing: :func:`stop_in_order` and :func:`drained`.

A run stops from its entrances inwards. The movers stop first, so no state move or shuffle
change begins while queries stop; then the request paths and the sources, so nothing new
enters; then, when asked to drain, it waits for every buffer to empty while the controller
still scales, so a vertex at zero wakes for what is left. Only then do the controller and the
run's threads stop, and every other query stops between two micro-batches: what a batch
committed is what the final status counts.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any, Protocol

from tidal.controller import Controller
from tidal.isb.base import BufferStore
from tidal.isb.control import ControlStore
from tidal.spark.batch.config import input_buffer
from tidal.spark.query.vertex import stop_between_batches
from tidal.spec import PipelineSpec, graph

__all__ = ["drained", "stop_in_order", "stop_query"]

log = logging.getLogger("tidal.pipeline")


class _Run(Protocol):
    """What the tear-down stops of a :class:`~tidal.spark.run.pipeline.PipelineRun`."""

    spec: PipelineSpec
    control_spec: PipelineSpec
    queries: dict[str, Any]
    requests: dict[str, Any]
    controller: Controller | None
    control: ControlStore | None
    buffers: BufferStore | None
    side_inputs: Any
    allocator: Any
    partition_scaler: Any
    shuffles: Any
    threads: list[Any]  # reference tables' refreshers and the buffer servers' watch

    def check(self) -> None: ...

    def write_status(self, state: str = "running", statuses: Any = None) -> None: ...


def drained(run: _Run) -> bool:
    """Every buffer is empty (sources stopped: nothing new arrives) and no query is mid-batch."""
    assert run.buffers is not None
    for v in run.control_spec.vertices:
        name = input_buffer(v)
        if name is not None and run.buffers.open(name).stats().pending > 0:
            return False
    return not any(q.isActive and q.status.get("isTriggerActive") for q in run.queries.values())


def stop_in_order(run: _Run, *, drain: bool, drain_timeout: float) -> None:
    """Stop everything ``run`` runs, in the module docstring's order; the final status last."""
    for mover in (run.partition_scaler, run.shuffles):  # no move may begin while the queries stop
        if mover is not None:
            mover.stop()
    for path in run.requests.values():  # HTTP sources: the activator and receivers close first
        path.stop()
    for name in [v.name for v in run.spec.vertices if v.source is not None]:
        try:  # a store that cannot be written (a full disk) must not stop the stop
            if run.control is not None:
                run.control.set_closing(name, True)
        except (OSError, sqlite3.Error) as exc:
            log.warning("could not mark source %s closed: %s", name, exc)
        stop_query(run.queries.get(name), name)
    if drain and run.controller is not None and run.buffers is not None:
        deadline = time.monotonic() + drain_timeout
        log.info("draining: sources stopped, waiting for the buffers to empty")
        while not drained(run) and time.monotonic() < deadline:
            run.check()
            time.sleep(0.2)
    if run.controller is not None:
        run.controller.stop()
    if run.side_inputs is not None:
        run.side_inputs.stop()
    for thread in run.threads:
        thread.stop()
    if run.allocator is not None:
        run.allocator.stop()
    for name in [v.name for v in graph.topological(run.spec)]:
        stop_query(run.queries.get(name), name)
    if run.controller is not None:
        try:
            run.write_status("stopped")
        except Exception as exc:  # a status that cannot be read must not block the stop
            log.debug("final status: %s", exc)


def stop_query(query: Any, name: str) -> None:
    """Stop ``query`` (the vertex ``name``'s, or None) between two micro-batches."""
    if query is None:
        return
    try:
        stop_between_batches(query)
    except Exception as exc:  # stopping a failed query may raise again; keep stopping
        log.debug("stopping %s: %s", name, exc)
