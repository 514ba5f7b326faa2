"""Benchmark: messages/s through a reduce vertex, against a plain PySpark windowed aggregation of
the same messages.

The work: ``RECORDS`` messages, each an integer with one of ``KEYS`` keys and an event time
(``RATE`` a second of event time, so ``RECORDS / RATE / WINDOW`` fixed windows of ``WINDOW``
seconds); the sum per key per window. ``local[2]``, one SparkSession, micro-batches of ``BATCH``
messages; the two jobs alternate, ``REPEATS`` times each:

- **plain**: one Structured Streaming query: the messages as text files (``t key value`` lines,
  ``BATCH`` a trigger) → ``withWatermark`` → ``groupBy(window, key).agg(sum)`` → Parquet (append).
  Spark keeps one running sum per key and window.
- **tidal**: the reduce vertex alone (:mod:`tidal.spark.query.reduce`), its input buffer filled
  beforehand (SQLite, keys and event times with each message), 2 replicas, 2 partitions,
  ``reduce_sum`` (numaflow-go's ``reduce-sum`` as a pynumaflow handler), exactly once into the
  output buffer. As Numaflow's reduce does, it hands the handler every message of a window when
  the window closes, so the state holds the window's messages, not a running sum.

Messages/s = the input rows processed after the first non-empty micro-batch, over the time to
the last one. Run: ``tidal bench reduce``; numbers go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, query_rate, vertex_rate, write_result
from tidal.spark.query.vertex import stop_between_batches

RECORDS = 100_000
BATCH = 10_000
KEYS = 10
RATE = 1_000.0  # messages per second of event time
WINDOW = 10  # seconds
REPEATS = 3
T0 = 1_700_000_000


def events() -> list[tuple[float, str, int]]:
    return [(T0 + i / RATE, f"k{i % KEYS}", i % 100) for i in range(RECORDS)]


def write_text(root: Path, rows: list[tuple[float, str, int]]) -> None:
    (root / "text").mkdir(parents=True)
    for n, at in enumerate(range(0, len(rows), BATCH)):
        lines = "".join(f"{t} {k} {v}\n" for t, k, v in rows[at : at + BATCH])
        (root / "text" / f"part-{n:05d}.txt").write_text(lines)


def plain_rate(spark: Any, root: Path, n: int) -> float:
    from pyspark.sql import functions as F  # noqa: N812

    raw = spark.readStream.schema("value STRING").option("maxFilesPerTrigger", 1).text(str(root / "text"))
    parts = F.split("value", " ")
    rows = raw.select(
        F.timestamp_seconds(parts[0].cast("double")).alias("et"),
        parts[1].alias("k"),
        parts[2].cast("long").alias("v"),
    ).withWatermark("et", "0 seconds")
    sums = rows.groupBy(F.window("et", f"{WINDOW} seconds"), "k").agg(F.sum("v").alias("sum"))
    query = (
        sums.writeStream.format("parquet").outputMode("append").option("path", str(root / f"plain-{n}"))
        .option("checkpointLocation", str(root / f"plain-ck-{n}"))
        .trigger(processingTime="0.2 seconds").start()
    )  # fmt: skip
    try:
        return query_rate(query, RECORDS)
    finally:
        stop_between_batches(query)


def tidal_rate(spark: Any, root: Path, n: int, rows: list[tuple[float, str, int]]) -> float:
    import pyarrow as pa

    from tidal.isb import BufferLimits
    from tidal.isb.control import ControlStore
    from tidal.isb.sqlite import SqliteStore
    from tidal.spark.batch.config import QueryConfig
    from tidal.spark.query.reduce import plan_reduce
    from tidal.spark.query.vertex import start_vertex
    from tidal.spec import Limits
    from tidal.spec.model import UdfSpec

    run_dir = root / f"tidal-{n}"
    db = run_dir / "pipeline.db"
    store = SqliteStore(db)
    limits = BufferLimits(max_length=2 * RECORDS)
    source = store.create("sum", limits)
    store.create("out", limits)
    for at in range(0, RECORDS, BATCH):
        part = rows[at : at + BATCH]
        source.append_batch(
            f"in:{at}",
            pa.array([f"in:{i}" for i in range(at, at + len(part))]),
            pa.array([str(v).encode() for _, _, v in part], pa.binary()),
            pa.array([t for t, _, _ in part], pa.float64()),
            pa.array([[k] for _, k, _ in part], pa.list_(pa.string())),
        )
    control = ControlStore(db)
    control.set_replicas("sum", 2)
    udf = UdfSpec.model_validate(
        {
            "reduce": "tidal.examples.numaflow:reduce_sum",
            "groupBy": {"window": {"fixed": {"length": WINDOW}}, "keyed": True},
        }
    )
    config = QueryConfig(
        "reducebench", "sum", str(db), str(run_dir), "sum", ("out",),
        limits=Limits(read_batch_size=BATCH // 2, buffer_max_length=2 * RECORDS), udf=udf,
    )  # fmt: skip
    frame = plan_reduce(spark, config)
    query = start_vertex(
        spark, config, run_dir / "checkpoint", trigger_seconds=0.2, frame=frame, shuffle_partitions=2
    )
    try:
        return vertex_rate(control, "sum", query, RECORDS)
    finally:
        stop_between_batches(query)
        store.close()
        control.close()


def main(out: Path = RESULTS, repeats: int = REPEATS) -> int:
    from tidal.spark.cluster.session import build_session
    from tidal.spark.query.datasource import register

    root = Path(tempfile.mkdtemp(prefix="tidal-bench-reduce-"))
    rows = events()
    write_text(root, rows)
    spark = build_session("tidal-bench-reduce", "local[2]", shuffle_partitions=2)
    register(spark)
    rates: dict[str, list[float]] = {"plain": [], "tidal": []}
    try:
        plain_rate(spark, root, -1)  # the session's first query warms the JVM: not counted
        for i in range(repeats):  # alternate, so drift on a shared machine hits both
            rates["plain"].append(plain_rate(spark, root, i))
            rates["tidal"].append(tidal_rate(spark, root, i, rows))
            print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1]:,.0f} messages/s" for k, v in rates.items()))
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    median = {name: statistics.median(r) for name, r in rates.items()}
    print()
    print(f"| job ({RECORDS:,} messages, {KEYS} keys, sum per key per {WINDOW} s window) | messages/s "
          f"(median of {repeats}) | × plain |")  # fmt: skip
    print("|---|---|---|")
    print(f"| plain PySpark (text files → withWatermark → groupBy(window, key).sum → Parquet) | "
          f"{median['plain']:,.0f} | 1.00× |")  # fmt: skip
    print(f"| Tidal reduce vertex (buffer → state store → reduce_sum per window → buffer) | "
          f"{median['tidal']:,.0f} | {median['tidal'] / median['plain']:.2f}× |")  # fmt: skip
    path = write_result("reduce", {"rates": rates, "median": median}, out)
    print(f"wrote {path}")
    return 0
