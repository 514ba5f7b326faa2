"""Where the controller's samples come from on a running pipeline: the buffers and the control store.

A UDF or sink's pending is its input buffer's (appended − committed); its input buffer is named
after the vertex. A source's pending is what the source itself reports: its reader writes what
it saw into the control record at every trigger (the reader runs in a Python process the JVM
starts, not in the driver's), with the vertex's processed count then, and what was processed
since comes off it; a ``source_pending`` callable given here takes precedence. A
negative value, a ``pending()`` that raises, or a report older than ``stale_after`` seconds means
"not available": the policy then leaves the source alone, as Numaflow's UDSource contract says.
Processed counts and busy seconds (what the writer tasks spent working) are the sums over the
vertex's committed micro-batches (:class:`~tidal.isb.control.ControlStore`). Ready replicas are
observed, not assumed: what the latest batches really ran
(:meth:`~tidal.isb.control.ControlStore.ready_replicas`), so a scale-up counts as ready only once
Spark ran it; on a cluster manager ``slots()`` caps them by the registered executors' cores
(:func:`~tidal.scaling.executors.slotted`, as admission does), since a partition without a core
only waits in Spark's queue. ``running(vertex)`` says whether the vertex's query is up: a vertex
whose query is down has no ready replica, and the policy does not scale it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from tidal.contracts import ask_pending
from tidal.controller.loop import ProbeSample
from tidal.isb.base import BufferStore
from tidal.isb.control import STALE_REPORT_SECONDS, ControlStore
from tidal.log import Repeated
from tidal.scaling.executors import slotted
from tidal.spec import PipelineSpec

__all__ = ["StoreProbe"]

log = logging.getLogger("tidal.controller")


class StoreProbe:
    def __init__(
        self,
        spec: PipelineSpec,
        buffers: BufferStore,
        control: ControlStore,
        source_pending: Mapping[str, Callable[[], float | None]] | None = None,
        *,
        running: Callable[[str], bool] | None = None,
        stale_after: float = STALE_REPORT_SECONDS,
        slots: Callable[[], Mapping[str, int]] | None = None,
        attainable: Callable[[], Mapping[str, int]] | None = None,
        measured: Mapping[str, Callable[[int], ProbeSample]] | None = None,
    ) -> None:
        # Vertices the runtime measures itself (an HTTP source: its request path), given the replicas.
        self._measured = dict(measured or {})
        self._buffers = buffers
        self._slots = slots
        self._attainable = attainable
        self._control = control
        self._source_pending = dict(source_pending or {})
        self._running = running
        self._stale_after = stale_after
        self._initial = {v.name: v.replicas for v in spec.vertices}
        self._sources = {v.name for v in spec.vertices if v.source is not None}
        self._repeated = Repeated(log)

    def sample(self, vertex: str) -> ProbeSample:
        replicas = self._control.replicas(vertex, default=self._initial[vertex])
        if vertex in self._measured:
            return self._measured[vertex](replicas)
        done = self._control.progress(vertex)
        age = 0.0
        if vertex in self._sources:
            pending, age = self._pending_of_source(vertex, float(done.processed))
        else:
            pending = float(self._buffers.open(vertex).stats().pending)
        if self._running is not None and not self._running(vertex):
            ready = 0
        else:
            ready = self._control.ready_replicas(vertex, replicas)
            if self._slots is not None:  # on a cluster: only the replicas that have a core
                ready = slotted(ready, self._slots().get(vertex))
        reads = self._control.read_counts(vertex, replicas)
        retried = float(self._control.sink_retried(vertex))
        return ProbeSample(
            float(done.processed),
            pending,
            replicas,
            ready,
            busy_seconds=done.busy,
            tasks=float(done.tasks),
            read_counts=reads,
            sink_retried=retried,
            throttled_at=self._control.throttled_at(vertex),
            age=age,
            attainable=None if self._attainable is None else self._attainable().get(vertex),
        )

    def source_pending(self, vertex: str) -> float | None:
        """What the controller reads as source ``vertex``'s pending now (``None``: not
        available), for the live status: the same number its decisions are made on."""
        return self._pending_of_source(vertex, float(self._control.progress(vertex).processed))[0]

    def _pending_of_source(self, vertex: str, processed: float) -> tuple[float | None, float]:
        """The source's pending, and how old it is (asked now: 0)."""
        report = self._source_pending.get(vertex)
        if report is None:
            return self._reported_pending(vertex, processed)
        value, why = ask_pending(report)
        if value is None and why.startswith("pending() raised"):
            self._repeated.warning(
                (vertex, why.split(":", 1)[0]), "source %s: %s; treated as not available", vertex, why
            )
        return value, 0.0

    def _reported_pending(self, vertex: str, processed: float) -> tuple[float | None, float]:
        """The reader's last report, less what the vertex processed since it was made: the
        two are a snapshot only together (:class:`~tidal.isb.control.SourceReport`), as of the
        report, whose age goes with it (a long micro-batch makes no report: the first one
        after an idle spell took 2 s on the cluster, and the next report's arrivals, read as
        a second's, were 2,491/s where 900/s arrived)."""
        report, now = self._control.source_report(vertex), time.time()
        if report is None or report.stale(now, self._stale_after):
            return None, 0.0
        if report.error:  # once per kind of error (its text before the first colon), then a count
            kind = report.error.split(":", 1)[0]
            self._repeated.warning(
                (vertex, kind), "source %s: %s (pending not available)", vertex, report.error
            )
        return report.pending_now(processed), max(0.0, now - report.at)
