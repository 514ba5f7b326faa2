"""Where the controller's samples come from on a running pipeline: the buffers and the control store.

A UDF or sink's pending is its input buffer's (appended − committed); its input buffer is named
after the vertex. A source's pending is what the source itself reports (its ``pending()``). A
negative value, or a ``pending()`` that raises, means "not available": the policy then leaves
the source alone, as Numaflow's UDSource contract says. Processed counts are the rows of the
vertex's committed micro-batches, recorded by its sink (:class:`~tidal.isb.control.ControlStore`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tidal.controller.loop import VertexSample
from tidal.isb.base import BufferStore
from tidal.isb.control import ControlStore
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
    ) -> None:
        self._buffers = buffers
        self._control = control
        self._source_pending = dict(source_pending or {})
        self._initial = {v.name: v.replicas for v in spec.vertices}
        self._kinds = {v.name: v.kind for v in spec.vertices}

    def sample(self, vertex: str) -> VertexSample:
        replicas = self._control.replicas(vertex, default=self._initial[vertex])
        processed = float(self._control.processed(vertex))
        if self._kinds[vertex] == "source":
            pending = self._pending_of_source(vertex)
        else:
            pending = float(self._buffers.open(vertex).stats().pending)
        return VertexSample(processed, pending, replicas)

    def _pending_of_source(self, vertex: str) -> float | None:
        report = self._source_pending.get(vertex)
        if report is None:
            return None
        try:
            value = report()
        except Exception as exc:  # the UDSource rule: raising = not available, keep running
            log.warning(
                "source %s: pending() raised %s: %s; treated as not available",
                vertex,
                type(exc).__name__,
                exc,
            )
            return None
        if value is None or value < 0:
            return None
        return float(value)
