"""Spark's executors through py4j: list them, request a total, kill by id.

The only place that calls into the JVM's ``SparkContext`` for executors; the allocator
(:mod:`tidal.spark.cluster.executors`) decides, this module does. ``requestTotalExecutors`` is absolute:
a relative request after a kill did nothing (measured).
"""

from __future__ import annotations

from typing import Any

from tidal.scaling.executors import Executor

__all__ = ["SparkExecutors"]


class SparkExecutors:
    """The py4j calls, nothing else: list, request a total, kill by id."""

    def __init__(self, spark: Any) -> None:
        self._sc = spark.sparkContext
        self._jsc = self._sc._jsc.sc()
        self._jvm = self._sc._jvm

    def _java(self, seq: Any) -> Any:
        return self._jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq)

    def registered(self) -> list[Executor]:
        out = []
        for e in self._java(self._jsc.statusStore().executorList(True)):
            if e.id() == "driver":
                continue
            out.append(
                Executor(
                    id=str(e.id()),
                    host=str(e.hostPort()).rsplit(":", 1)[0],
                    cores=int(e.totalCores()),
                    active_tasks=int(e.activeTasks()),
                    completed_tasks=int(e.completedTasks()),
                    added_at=e.addTime().getTime() / 1000.0,
                )
            )
        return out

    def removed(self) -> dict[str, str]:
        """Executors Spark lists as gone, with its reason ("Worker lost", "Command exited with
        code 137", …): the status store keeps them after they leave."""
        out = {}
        for e in self._java(self._jsc.statusStore().executorList(False)):
            if e.id() != "driver" and not e.isActive():
                reason = e.removeReason()
                out[str(e.id())] = str(reason.get()) if reason.isDefined() else "no reason given"
        return out

    def request_total(self, n: int) -> bool:
        empty = getattr(self._jvm.scala.collection.immutable, "Map$").__getattr__("MODULE$").empty()
        return bool(self._jsc.requestTotalExecutors(n, 0, empty))

    def kill(self, ids: list[str], *, force: bool) -> list[str]:
        """The scheduler backend's ``killExecutors`` (what ``SparkContext.killExecutors`` calls,
        lowering Spark's target by as many): the ids it killed. Not ``SparkContext``'s own, which
        refuses once the session was made with dynamic allocation on, as Tidal's is for its first
        executor limit (:mod:`session`).

        Unforced, Spark's scheduler refuses an executor that runs a task, checked under its own
        lock: the status store the allocator chose from lags the scheduler, and an executor it
        listed idle may have been given a task since. Killed with it, the cluster's bursts lost
        `orders`' task and stalled its stream 5.4 s, until the dying executor's loss was noticed
        and the task ran again (2026-12-06)."""
        convert = self._jvm.scala.jdk.javaapi.CollectionConverters
        seq = convert.asScala(self._jvm.java.util.ArrayList(ids)).toSeq()
        killed = self._jsc.schedulerBackend().killExecutors(seq, True, False, force)
        return [str(i) for i in self._java(killed)]
