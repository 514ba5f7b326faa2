"""The peer a Spark user runs instead of Tidal: the same steps as one plain query, scaled by
Spark's own dynamic allocation.

``python -m tidal.bench.peer_query --master spark://… --shape JSON --duration S --out FILE`` runs
on the cluster the benchmark started (:mod:`tidal.bench.peers`):

- **source**: a Python streaming source whose messages fall due by the same load shape as
  Tidal's generator (:class:`~tidal.spec.shapes.LoadShape`; each message's source time is when
  the shape made it due, :func:`~tidal.spark.sources.generator.due_times`), split into ``PARTITIONS``
  tasks a micro-batch;
- **steps**: ``mapInArrow`` building the generator's payloads and calling the demo's
  ``enrich`` (2 ms of lookup per order) once per message;
- **sink**: :class:`~tidal.bench.latency.LatencyProbe`, which records every committed batch's
  delivery delays (source time to the commit), as Tidal's sinks do;
- **dynamic allocation**, tuned as its docs advise for a bursty stream: shuffle tracking on (a
  streaming query has no external shuffle service here), ``schedulerBacklogTimeout`` and
  ``sustainedSchedulerBacklogTimeout`` 1 s (a wave's backlog asks for executors within a second),
  ``executorIdleTimeout`` 10 s (a quarter-second trigger keeps a working executor busy, and the
  quiet spells of the waves last 70 s: an idle executor goes well within one), 1 to
  ``max_executors`` executors of ``executor_cores`` cores, the same bounds Tidal has.

Executors are counted every half second from Spark's status store (as Tidal's allocator reads
them): executor-seconds, core-seconds, the count over time and each change. The result is one
JSON line in ``--out``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

__all__ = ["PARTITIONS", "ShapeSource", "dynamic_allocation_conf", "main"]

PARTITIONS = 8  # tasks a micro-batch: the plain query the issue measured
TRIGGER_S = 0.25  # Tidal's default trigger
SIZE = 60  # the demo's message size


def dynamic_allocation_conf(max_executors: int, executor_cores: int, idle_timeout: float) -> dict[str, str]:
    """Spark's dynamic allocation as a user tunes it for a bursty stream (see the module's doc)."""
    return {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.minExecutors": "1",
        "spark.dynamicAllocation.initialExecutors": "1",
        "spark.dynamicAllocation.maxExecutors": str(max_executors),
        "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
        "spark.dynamicAllocation.sustainedSchedulerBacklogTimeout": "1s",
        "spark.dynamicAllocation.executorIdleTimeout": f"{idle_timeout:g}s",
        "spark.executor.cores": str(executor_cores),
        "spark.cores.max": str(max_executors * executor_cores),
    }


class _ShapeReader(DataSourceStreamReader):
    def __init__(self, shape: Any, start: float) -> None:
        self.shape = shape
        self.start = start

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        return {"n": 0}

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
        return {"n": self.shape.total(time.time() - self.start)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        from tidal.spark.batch.admission import split

        return list(split(start["n"] + 1, end["n"], PARTITIONS))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        from tidal.spark.sources.generator import due_times

        first, last = partition.first, partition.last  # type: ignore[attr-defined]
        numbers = np.arange(first, last + 1, dtype=np.int64)
        due = due_times(self.shape, self.start, first, last)
        yield pa.RecordBatch.from_arrays(
            [pa.array(numbers), pa.array(due, pa.float64())], names=["value", "t"]
        )


class ShapeSource(DataSource):
    """``format("tidal_peer_shape").option("shape", JSON).option("start", …)``: ``value`` and
    ``t``, the second the load shape made the message due."""

    @classmethod
    def name(cls) -> str:
        return "tidal_peer_shape"

    def schema(self) -> str:
        return "value long, t double"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802
        from tidal.spec.shapes import LoadShape, Shape

        raw = json.loads(self.options["shape"])
        shape = LoadShape(Shape(raw.pop("shape")), **raw)
        return _ShapeReader(shape, float(self.options["start"]))


def _work(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    from tidal.examples.udfs import enrich
    from tidal.spark.sources.generator import numbered_payloads

    for batch in batches:
        if batch.num_rows == 0:
            continue
        built = numbered_payloads("orders", batch.column("value").cast(pa.string()), SIZE)
        payloads = pa.array([enrich(p) for p in built.to_pylist()], pa.binary())
        yield pa.RecordBatch.from_arrays([payloads, batch.column("t")], names=["payload", "t"])


class _ExecutorWatch:
    """The registered executors every half second: the count over time, integrated."""

    def __init__(self, spark: Any) -> None:
        from tidal.spark.cluster.spark_executors import SparkExecutors

        self._executors = SparkExecutors(spark)
        self.timeline: list[tuple[float, int, int]] = []  # (at, executors, cores)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peer-executors", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                found = self._executors.registered()
                self.timeline.append((time.time(), len(found), sum(e.cores for e in found)))
            except Exception:  # the context stopping under us: the last reading stands
                break
            self._stop.wait(0.5)

    def start(self) -> _ExecutorWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def seconds(self, begin: float, end: float) -> tuple[float, float, int]:
        """Executor-seconds and core-seconds over [begin, end], and the changes of the count."""
        executor_s = core_s = 0.0
        changes = 0
        points = [p for p in self.timeline if begin <= p[0] <= end]
        for (a, n, c), (b, m, _) in itertools.pairwise(points):
            executor_s += n * (b - a)
            core_s += c * (b - a)
            changes += n != m
        return executor_s, core_s, changes


def run(master: str, shape: dict[str, Any], duration: float, out: Path, *, max_executors: int = 4,
        executor_cores: int = 2, idle_timeout: float = 10.0) -> dict[str, Any]:  # fmt: skip
    from pyspark.sql import SparkSession

    from tidal.bench.latency import LatencyProbe, _read_probe
    from tidal.scaling.latency import pooled
    from tidal.spark.cluster import cds
    from tidal.spark.cluster.interpreter import spark_python
    from tidal.spark.cluster.jit import QUICK_OPTIONS
    from tidal.spark.cluster.session import executor_java_options

    # The Java options Tidal's JVMs get for these steps (all Python: the class-data archive and
    # C1 only), for this job's too: its executors start as fast.
    java = {"spark.driver.extraJavaOptions": cds.driver_options(),
            "spark.executor.extraJavaOptions": executor_java_options(master, QUICK_OPTIONS)}  # fmt: skip
    # Spark's Python processes run this interpreter, as for Tidal's jobs: started outside make,
    # this job ran them on the system's python and delivered nothing for its whole duration.
    builder = SparkSession.builder.appName("tidal-peer-dynamic-allocation").master(master)
    builder = builder.config("spark.pyspark.python", spark_python())
    for key, value in {**dynamic_allocation_conf(max_executors, executor_cores, idle_timeout),
                       "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                       **{k: v for k, v in java.items() if v}}.items():  # fmt: skip
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.dataSource.register(ShapeSource)
    spark.dataSource.register(LatencyProbe)
    watch = _ExecutorWatch(spark).start()
    probe = out.with_suffix(".delays.jsonl")
    began = time.time()
    query = (
        spark.readStream.format("tidal_peer_shape").option("shape", json.dumps(shape))
        .option("start", repr(began)).load().mapInArrow(_work, "payload binary, t double")
        .writeStream.format("latency_probe").option("path", str(probe))
        .option("checkpointLocation", str(out.with_suffix(".checkpoint")))
        .trigger(processingTime=f"{int(TRIGGER_S * 1000)} milliseconds").queryName("peer").start()
    )  # fmt: skip
    try:
        query.awaitTermination(max(1, round(duration)))  # returns at once if the query fails
    finally:
        failed = query.exception()
        query.stop()
        ended = time.time()
        watch.stop()
        spark.stop()
    if failed is not None:  # a job that delivered nothing must not read as a cheap one
        raise RuntimeError(f"the dynamic-allocation query failed: {failed}")
    delays = pooled(_read_probe(probe, began, ended + 60), ended)
    executor_s, core_s, changes = watch.seconds(began, ended)
    result = {
        "executor_seconds": round(executor_s, 1),
        "core_seconds": round(core_s, 1),
        "p50_delay": delays.p50,
        "p99_delay": delays.p99,
        "max_delay": delays.max,
        "delivered": delays.count,
        "actions": changes,
        "executors": [(round(a - began, 1), n) for a, n, _ in watch.timeline],
    }
    out.write_text(json.dumps(result))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--master", required=True)
    parser.add_argument("--shape", required=True, help="the load shape as JSON (LoadShape's fields)")
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--idle-timeout", type=float, default=10.0)
    args = parser.parse_args(argv)
    run(args.master, json.loads(args.shape), args.duration, Path(args.out), idle_timeout=args.idle_timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
