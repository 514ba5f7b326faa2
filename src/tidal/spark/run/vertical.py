"""The vertical recommendations of a running pipeline: memory and cores per replica, per query.

Each committed micro-batch records what its tasks used (:mod:`tidal.spark.batch.usage`: the largest
peak resident memory of a task's Python worker, and the CPU and busy seconds of its tasks);
:class:`VerticalWatch` feeds them, batch by batch, into one VPA recommender per query
(:class:`~tidal.scaling.vertical.VerticalRecommender`). A chain's replicas run every member, so
the recommendation is the chain's, shown at its head.

What Spark lets a run change, and what it does not (docs/api.md): the memory of an executor's
JVM (``spark.executor.memory``), of its Python workers (``spark.executor.pyspark.memory``) and
its cores are fixed when the executor starts, and a standalone cluster starts every executor of
an application with the same ones unless dynamic allocation's resource profiles are used — which
Tidal cannot, since it requests and kills the executors itself. So a recommendation is shown
(status, report, dashboard, the API) with the settings to start the next run with; applying it
takes a restart.
"""

from __future__ import annotations

from tidal.isb.control import ControlStore
from tidal.scaling.vertical import Recommendation, VerticalRecommender

__all__ = ["VerticalWatch"]


class VerticalWatch:
    """``update(control)`` at every status poll; ``recommendation(vertex)``."""

    def __init__(self, vertices: list[str]) -> None:
        self._recommenders = {v: VerticalRecommender() for v in vertices}
        self._last = dict.fromkeys(vertices, -1)

    def update(self, control: ControlStore) -> None:
        for vertex, recommender in self._recommenders.items():
            for batch_id, at, peak, cpu, busy, _tasks in control.usage(vertex, self._last[vertex]):
                cores = cpu / busy if cpu is not None and busy > 0 else None
                recommender.observe(at, peak, cores)
                self._last[vertex] = batch_id

    def recommendation(self, vertex: str) -> Recommendation | None:
        recommender = self._recommenders.get(vertex)
        return recommender.recommend() if recommender is not None else None
