"""Run by ``test_warm_executors.py`` in a process of its own (one SparkContext per process):
a session on the standalone cluster at ``argv[1]`` (worker PIDs in ``argv[2]``, comma-separated),
two executors asked for, warmed once registered, then a Python job. Prints what it saw as JSON."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tidal.spark.cluster.session import pipeline_session
from tidal.spark.cluster.spark_executors import SparkExecutors
from tidal.spark.cluster.warm import ExecutorWarmer, step_modules
from tidal.spec import parse_pipeline


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def daemons(workers: set[int]) -> set[int]:
    """Python daemons whose executor JVM a worker of this cluster launched."""
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if "tidal.spark.query.daemon" not in (entry / "cmdline").read_text():
                continue
            pid = int(entry.name)
            if parent(parent(pid)) in workers:
                out.add(pid)
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    return out


def daemon_of(batches):
    import pyarrow as pa

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"daemon": [os.getppid()]})


def wait(check, what: str, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def main() -> None:
    master, workers = sys.argv[1], {int(p) for p in sys.argv[2].split(",")}
    spec = parse_pipeline(
        {
            "name": "warm",
            "cluster": {"executorCores": 1, "minExecutors": 0, "maxExecutors": 2},
            "vertices": [
                {"name": "in", "source": {"generator": {"rate": 1}}},
                {"name": "work", "udf": {"map": "tidal.examples.udfs:upper"}},
                {"name": "out", "sink": {"blackhole": {}}},
            ],
            "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "out"}],
        }
    )
    spark = pipeline_session(spec, master)
    executors = SparkExecutors(spark)
    executors.request_total(2)
    wait(lambda: len(executors.registered()) == 2, "2 executors")
    listed = executors.registered()
    before = daemons(workers)  # no Python task has run on them yet
    warmer = ExecutorWarmer(spark, step_modules(spec)).start()
    warmer.joined(sum(e.cores for e in listed))
    wait(lambda: warmer.jobs >= 1, "the warm-up job")
    warmed = daemons(workers)
    # A Python step's kind of job now (SQL, Arrow batches, as a vertex's micro-batch): its
    # workers are forked by (or reused from) those daemons.
    ran = [r.daemon for r in spark.range(0, 4, 1, 4).mapInArrow(daemon_of, "daemon long").collect()]
    # An RDD job is not what a vertex runs, and Spark keys its daemons by the job's artifact
    # session too (a SQL job's is the session's): it starts daemons of its own.
    rdd = spark.sparkContext.parallelize(range(2), 2).map(lambda _: os.getppid()).collect()
    after = daemons(workers)
    warmer.stop()
    spark.stop()
    print(
        json.dumps(
            {
                "modules": list(step_modules(spec)),
                "before": sorted(before),
                "warmed": sorted(warmed),
                "reported": sorted(pid for _, pid in warmer.daemons),
                "ran_in": sorted(set(ran)),
                "rdd_in": sorted(set(rdd)),
                "after": sorted(after),
            }
        )
    )


if __name__ == "__main__":
    main()
