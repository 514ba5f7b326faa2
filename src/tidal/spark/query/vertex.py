"""One vertex = one Structured Streaming query, in its own FAIR pool.

The wiring lives here once: the query's configuration as the source's and the sink's option, a processing-time
trigger so an idle vertex does not spin (with the default trigger Spark polls ~80 times a second),
the checkpoint, and the scheduler pool named after the vertex.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from tidal.spark.batch.config import QueryConfig

__all__ = [
    "ROCKSDB",
    "STATE_STORE_KEY",
    "failure_reason",
    "first_batch_after",
    "past_start",
    "start_vertex",
    "stop_between_batches",
]

STATE_STORE_KEY = "spark.sql.streaming.stateStore.providerClass"
# A reduce vertex's state store: Spark's offline repartition (tidal.spark.run.repartition) moves
# RocksDB state only; it refuses the default HDFS-backed store (measured on 4.3.0).
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def start_vertex(
    spark: Any,
    config: QueryConfig,
    checkpoint: str | Path,
    *,
    trigger_seconds: float = 0.25,
    frame: Any = None,
    shuffle_partitions: int | None = None,
    state_store: str | None = None,
    conf: dict[str, str] | None = None,
) -> Any:
    """Start the query of ``config.vertex`` and return its ``StreamingQuery``. ``frame``: what
    a SQL or DataFrame step writes (:func:`tidal.spark.query.frames.plan_step`); other vertices
    read ``tidal_vertex`` straight into its writer. ``shuffle_partitions`` and ``state_store``
    (a state store provider class): a stateful query's, taken into its checkpoint at its first
    batch (Spark keeps the checkpoint's afterwards). ``conf``: more SQL settings for this query
    alone (a query takes the session's settings when it starts)."""
    options = config.options()
    context = spark.sparkContext
    # Spark looks a Python data source up in the calling thread's active session: a thread of
    # Tidal's own (the shuffle follower, a move) has none, and start() then fails with
    # DATA_SOURCE_NOT_FOUND: tidal_vertex (measured on 4.3.0).
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    if frame is None:
        frame = spark.readStream.format("tidal_vertex").options(**options).load()
    # A local property is per thread and a query's thread inherits it when it starts.
    context.setLocalProperty("spark.scheduler.pool", config.vertex)
    # A reduce vertex's partitions: the query takes the session's conf when it starts (and keeps
    # it in its checkpoint from the first batch on), so it is set around start() only.
    around = {
        key: value
        for key, value in (
            ("spark.sql.shuffle.partitions", shuffle_partitions),
            (STATE_STORE_KEY, state_store),
            *(conf or {}).items(),
        )
        if value
    }
    previous = {key: spark.conf.get(key, None) for key in around}
    for key, value in around.items():
        spark.conf.set(key, str(value))
    try:
        return (
            frame.writeStream.format("tidal_vertex")
            .options(**options)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime=f"{max(1, int(trigger_seconds * 1000))} milliseconds")
            .queryName(config.vertex)
            .start()
        )
    finally:
        context.setLocalProperty("spark.scheduler.pool", None)
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def stop_between_batches(query: Any, timeout: float = 10.0) -> None:
    """Stop ``query``, between two micro-batches where possible.

    Stopping one mid-batch is safe (the batch replays at the next start) but makes Spark log
    ERRORs about aborted commits, which look like a failure to whoever reads the log.
    """
    deadline = time.monotonic() + timeout
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def first_batch_after(query: Any, after: int, since: float, timeout: float) -> float | None:
    """Seconds from ``since`` (a ``time.monotonic()``) to ``query``'s first batch past batch
    ``after``: the pause a restart cost. None when none came within ``timeout`` (no input)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and query.isActive:
        progress = query.lastProgress
        if progress is not None and int(progress["batchId"]) > after:
            return time.monotonic() - since
        time.sleep(0.05)
    return None


def past_start(query: Any) -> bool:
    """The query finished a micro-batch, or its first trigger found nothing and it now waits (or
    it failed): Spark's warm-up is over.

    "Writing offsets to log" and "Processing new data" are not enough: in a fresh JVM the first
    batch takes 5-6 s (planning the Python data source's writer, the first Python workers), and
    a controller that decided then saw an idle pipeline and sent its vertices to zero, to wake
    them a few seconds later."""
    if not query.isActive or query.lastProgress is not None:
        return True
    return str(query.status.get("message", "")).startswith("Waiting for data to arrive")


def failure_reason(exc: object) -> str:
    """The useful part of a failed query's exception (Spark wraps the Python traceback in JVM
    frames): Tidal's error with the user's frames that follow it, else the last Python error."""
    text = str(exc)
    found = re.findall(r"tidal\.errors\.\w+: (.+(?:\n  .*)*)", text)
    if found:
        return str(found[-1]).strip()
    found = re.findall(r"(\w+(?:Error|Exception): .+)", text)
    if found:
        return str(found[-1]).strip()
    return text.strip().splitlines()[0] if text.strip() else repr(exc)
