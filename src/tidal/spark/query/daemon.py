"""PySpark's daemon, with the pure-Python part of every worker's imports done once, before it forks.

Spark starts one Python daemon per executor (and one in the driver in local mode) and forks a
Python worker from it for every task runner that finds no idle worker, and for the streaming
sources' and sinks' runners. PySpark's own daemon imports nothing before it forks, so each worker
imported ``pyspark.worker`` and then the Tidal modules its task unpickles: 0.2–0.3 s per worker
on a quiet 2-core box, paid again by every new executor's first tasks and by every cold run.

PySpark imports nothing early on purpose: numpy starts its BLAS thread pool and pyarrow
jemalloc's background thread when imported, and a forked child gets none of its parent's
threads. So this module imports only modules that start no thread and pull in neither numpy,
pyarrow nor pandas (a unit test holds it to that: ``tests/unit/runtime/test_daemon.py``); pyarrow
is still imported in each worker, after the fork, as before. Then :func:`gc.freeze` keeps the
imported objects out of the children's collections (and their pages shared).

The session sets it as ``spark.python.daemon.module`` (:mod:`tidal.spark.cluster.session`): workers on
other hosts need Tidal installed, which running Tidal's tasks there needs anyway.
"""

from __future__ import annotations

import gc

# What every forked worker runs first, and the runners of the streaming sinks' commits:
import pyspark.sql.worker.commit_data_source_write
import pyspark.sql.worker.python_streaming_sink_runner
import pyspark.sql.worker.write_into_data_source
import pyspark.worker  # noqa: F401
from pyspark.daemon import manager

# What a vertex's tasks unpickle (the generator's reader too: the demo's and the benchmarks' source):
import tidal.spark.batch.readers
import tidal.spark.query.datasource
import tidal.spark.query.writer
import tidal.spark.sources.connector
import tidal.spark.sources.generator  # noqa: F401

__all__ = ["manager"]

if __name__ == "__main__":
    gc.freeze()
    manager()
