"""The source seam: what every source kind implements, and the registry that maps ``source:``'s kinds to them.

A source kind has two sides, as a source has in Flink's FLIP-27 or in Kafka Connect:

- **the driver side**, :meth:`SourceConnector.reader`: a Spark stream reader (built on
  :class:`~tidal.spark.batch.readers.RangeReader`) that asks the source how much is pending,
  reports it to the control record for the controller, and plans each micro-batch as ranges
  (one task per replica, :mod:`tidal.spark.batch.admission`);
- **the task side**, :meth:`SourceConnector.read_range`: the messages of one range as one Arrow
  batch (``seq, id, payload, t``), made again identically when the range is replayed.

A **staged** kind (``SourceSpec.staged``: a user's class, a pynumaflow ``Sourcer``, a JetStream
stream) reads its source on the driver side into the vertex's staging buffer, stored (and synced)
before it is acknowledged upstream; its tasks then read that buffer as any vertex reads its input,
so it has no task side. :meth:`SourceConnector.stored` runs once a micro-batch is stored
downstream (Kafka commits its group's offsets there). The HTTP source is **served**: its replicas
are the request path's receivers (:mod:`tidal.request`), which append to the vertex's output
buffers themselves; no Spark query runs for it.

**Adding a source kind**: its spec model and field in ``SourceSpec`` (:mod:`tidal.spec.endpoints`),
a module in this room with a ``CONNECTOR``, and one line in :data:`SOURCES`. The query runtime
(:mod:`tidal.spark.query`) knows no kind by name. The modules are imported when a query first
needs them, so a task's worker imports only its own kind (and never the spec package, whose
pydantic models a task does not need).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tidal import errors

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql.datasource import DataSourceStreamReader

    from tidal.spark.batch.config import QueryConfig
    from tidal.spec.model import SourceSpec

__all__ = ["SOURCES", "SourceConnector", "source_connector"]


class SourceConnector:
    """One kind of source. Subclasses override what their kind does; the defaults say what a kind
    that does not do it means."""

    kind = ""
    guarantee = "exactly once"  # into the pipeline; docs/operations.md has every kind's table

    def reader(self, config: QueryConfig) -> DataSourceStreamReader:
        """The driver side: offsets, pending, and the micro-batch's ranges."""
        raise errors.SpecError(
            f"vertices[{config.vertex}].source.{self.kind}",
            "runs no Spark query",
            "its replicas are served outside Spark (the HTTP source's receivers)",
        )

    def read_range(self, config: QueryConfig, part: int, first: int, last: int, t0: float) -> Any:
        """The task side: messages ``first..last`` (of the source's partition ``part``, -1 for a
        source with none; ``t0`` the generator's clock start, else NaN) as one Arrow batch."""
        raise errors.SpecError(
            f"vertices[{config.vertex}].source.{self.kind}",
            "has no task side",
            "a staged source's tasks read its staging buffer (QueryConfig.input)",
        )

    def stored(self, config: QueryConfig) -> None:
        """A micro-batch of this source is stored downstream (the writer's commit, in the driver)."""
        return None

    def driver_pending(self, config: QueryConfig) -> Callable[[], float | None] | None:
        """What is pending, asked in the driver at any moment (the controller's probe), or
        ``None``: the kind says it only through its reader, at each trigger, and the probe reads
        that report. A kind that can say it without its reader should: a query restarting for
        a replica change runs no trigger for seconds, and its pending, frozen meanwhile, hides
        a load that rises then (:mod:`tidal.controller.probe`)."""
        return None


_HERE = "tidal.spark.sources"
SOURCES: dict[str, str] = {  # spec kind → the module whose CONNECTOR implements it
    "generator": f"{_HERE}.generator",
    "user": f"{_HERE}.user",
    "pynumaflow": f"{_HERE}.pynumaflow",
    "kafka": f"{_HERE}.kafka",
    "http": f"{_HERE}.http",
    "jetstream": f"{_HERE}.jetstream",
    "nats": f"{_HERE}.nats",
}


def source_connector(spec: SourceSpec) -> SourceConnector:
    """The connector of the one kind ``spec`` names."""
    kind = spec.kind
    if kind not in SOURCES:
        raise errors.SpecError(f"source.{kind}", "has no connector", f"register it in {__name__}.SOURCES")
    connector = importlib.import_module(SOURCES[kind]).CONNECTOR
    assert isinstance(connector, SourceConnector), f"{SOURCES[kind]}.CONNECTOR is not a SourceConnector"
    return connector
