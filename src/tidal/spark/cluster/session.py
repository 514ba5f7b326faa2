"""The SparkSession Tidal needs: local by default, loopback only, FAIR pools, quiet logs."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from tidal.spark.cluster.interpreter import spark_python

if TYPE_CHECKING:
    from tidal.spec import PipelineSpec

__all__ = [
    "build_session",
    "cluster_conf",
    "executor_java_options",
    "pipeline_session",
    "take_over_executors",
]

log = logging.getLogger("tidal.pipeline")  # the run's log: its set-up lines beside the rest

REMOVE_DELAY = "1s"  # how long Spark keeps a disconnected executor listed (see cluster_conf)


def build_session(
    app_name: str = "tidal",
    master: str = "local[2]",
    *,
    ui: bool = False,
    shuffle_partitions: int = 2,
    log_level: str = "ERROR",
    extra: dict[str, str] | None = None,
) -> SparkSession:
    """Create (or reuse) the session. Executors run this interpreter, so they see the venv.

    Nothing listens beyond 127.0.0.1 unless the caller asks: the UI is off by default and the
    driver binds to ``SPARK_LOCAL_IP``, which is loopback unless set. On several hosts, set it to
    the driver host's address (executors elsewhere connect back to it), or give
    ``spark.driver.host`` in ``cluster.conf``.
    """
    from tidal.spark.cluster import cds

    python = spark_python()
    java = f"-Dlog4j2.level=ERROR {cds.driver_options()}".strip()  # the class-data archive, if built
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
        .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.scheduler.mode", "FAIR")
        .config("spark.pyspark.python", python)
        # PySpark's daemon with the thread-free part of every worker's imports done before it
        # forks (tidal.spark.query.daemon): each new Python worker is ready sooner.
        .config("spark.python.daemon.module", "tidal.spark.query.daemon")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", java)
        # Streaming checkpoints (every query's offset and commit logs) are written through
        # Hadoop's FileContext; on file:// its default (ChecksumFs) writes a .crc beside every
        # log file. The raw local FS keeps the write-then-rename that makes a log entry atomic
        # and drops the checksum: 86 → 36 ms (offset log) and 92 → 49 ms (commit log) per
        # micro-batch per query, measured with three queries on 2 cores (docs/benchmarks.md).
        .config("spark.hadoop.fs.AbstractFileSystem.file.impl", "org.apache.hadoop.fs.local.RawLocalFs")
    )
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


def pipeline_session(spec: PipelineSpec, master: str, master_web: str | None = None) -> SparkSession:
    """The run's Spark session. On a cluster manager, first: the master answers, the cluster has
    room for the ``cluster:`` block (:func:`~tidal.spark.cluster.standalone.check_capacity`), and the
    executors' settings (:func:`cluster_conf`, their JIT chosen by :mod:`tidal.spark.cluster.jit`)."""
    if not master.startswith("spark://"):
        return build_session(f"tidal-{spec.name}", master)
    from tidal.spark.cluster.jit import choose
    from tidal.spark.cluster.standalone import check_capacity

    check_master(master)
    check_capacity(spec.cluster, master, master_web)
    jit = choose(spec)
    log.info("executors' JIT: %s (%s)", jit.mode, jit.reason)
    return build_session(f"tidal-{spec.name}", master, extra=cluster_conf(spec.cluster, master, jit.options))


def check_master(master: str, timeout: float = 3.0) -> None:
    """Refuse an unreachable ``spark://HOST:PORT`` before Spark spends a minute retrying it."""
    import socket

    from tidal import errors
    from tidal.spark.cluster.standalone import master_address

    host, port = master_address(master)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise errors.ClusterError(
            f"cannot reach the Spark master at {master} ({reason}): start it "
            "(`tidal cluster up DIR`, or `tidal run --cluster local:N` for one just for this run) "
            "or fix --master / cluster.master"
        ) from None


def cluster_conf(cluster: Any, master: str = "", jit: str = "") -> dict[str, str]:
    """Spark settings for a pipeline on a cluster manager (``cluster:`` in the spec): the first
    executor limit (below), executor size, at most ``maxExecutors`` executors' cores, the driver's
    ``PYTHONPATH`` for the executors (the pipeline's UDF modules), and the executors' Java options
    (:func:`executor_java_options`), unless the spec's own ``conf`` sets them.

    **The first executor limit.** A standalone master launches an executor for every core of
    ``spark.cores.max`` as soon as an application registers, unless the application starts with
    an executor limit, which Spark sets (to 0) only when dynamic allocation is on
    (``StandaloneSchedulerBackend``): a run with ``maxExecutors: 4`` started with four executors
    and paid ~17 executor-seconds for them before the allocator could kill the extra ones
    (docs/benchmarks.md, the idle trace). So the session is made with Spark's dynamic allocation
    on, its first target ``minExecutors``, and :func:`take_over_executors` stops Spark's
    allocation manager as soon as the session exists: from then on only Tidal asks for and
    kills executors, as before. (Shuffle tracking is on only because Spark refuses dynamic
    allocation without it or a shuffle service; Tidal's queries shuffle only in a reduce's
    stateful stage, whose state is in the checkpoint, not in an executor's shuffle files.)

    **A killed executor gone when it is.** Spark's standalone backend keeps an executor whose
    connection dropped for ``spark.standalone.executorRemoveDelayOnDisconnection`` (5 s) before
    removing it, waiting for the master's exit reason; for an executor the driver killed, the
    master has already forgotten it and sends none. Its JVM exits within a second of the kill
    (the worker's log), but Spark listed it for 5.2 s after (measured: both its status store and
    its backend), so the allocator's count, and the executor-seconds in the run's executor log,
    held every killed executor 4.2 s longer than the cluster did: on the demo's waves, ten kills
    a run. At 1 s (:data:`REMOVE_DELAY`), a lost executor's reason still comes from the master
    when it comes within that second, else Spark gives "Remote RPC client disassociated"."""
    first = str(cluster.min_executors)
    conf = {
        **cluster.conf,
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
        "spark.dynamicAllocation.minExecutors": first,
        "spark.dynamicAllocation.initialExecutors": first,
        "spark.executor.instances": first,  # else Spark warns that 0 is below minExecutors
        "spark.dynamicAllocation.maxExecutors": str(cluster.max_executors),
        "spark.executor.cores": str(cluster.executor_cores),
        "spark.executor.memory": cluster.executor_memory,
        "spark.cores.max": str(cluster.executor_cores * cluster.max_executors),
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
    }
    conf.setdefault("spark.standalone.executorRemoveDelayOnDisconnection", REMOVE_DELAY)
    if os.environ.get("PYTHONPATH"):
        conf["spark.executorEnv.PYTHONPATH"] = os.environ["PYTHONPATH"]
    java = executor_java_options(master, jit)
    if java and "spark.executor.extraJavaOptions" not in conf:
        conf["spark.executor.extraJavaOptions"] = java
    return conf


def executor_java_options(master: str, jit: str = "") -> str:
    """The executors' Java options: the class-data archive for workers on this machine
    (:mod:`tidal.spark.cluster.cds`) and the JIT's (:mod:`tidal.spark.cluster.jit`)."""
    from tidal.spark.cluster import cds

    return " ".join(o for o in (cds.executor_options(master), jit) if o)


def take_over_executors(spark: SparkSession) -> bool:
    """Stop Spark's dynamic allocation manager, once it has set the master's first executor limit
    (:func:`cluster_conf`), so that only Tidal's allocator requests and kills executors; True
    when there was one to stop. Its listeners stay registered and only keep counts; its
    scheduling thread, the one that asks for and removes executors, ends here, before any
    query has run a task (so it has not yet changed its target). Also a session whose
    ``spark-defaults.conf`` turned dynamic allocation on is taken over this way."""
    manager = spark.sparkContext._jsc.sc().executorAllocationManager()
    if manager.isEmpty():
        return False
    manager.get().stop()
    return True
