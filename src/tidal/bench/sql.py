"""Benchmark: records/s of a SQL step's vertex, against a plain PySpark job running the same SQL
over the same rows, and against the same logic as a Tidal Python step.

The work (``docs/steps.md``): JSON orders → parse with a schema → keep ``qty > 0`` → join a
Parquet table of skus (price, region) → the total. ``RECORDS`` orders, micro-batches of
``BATCH`` rows in 2 partitions, ``local[2]``, one SparkSession; the three jobs alternate,
``REPEATS`` times each:

- **plain**: one Structured Streaming query: the orders as text files (``BATCH / 2`` lines
  each, two files a trigger) → ``from_json`` → the same SQL → the Parquet file sink. No buffers,
  nothing done about bad records.
- **tidal sql**: the SQL step's vertex alone, its input buffer filled beforehand with the same
  orders (SQLite), 2 replicas, ``readBatchSize`` ``BATCH / 2``: bad records to a dead letter,
  exactly once into the output buffer.
- **tidal python**: the same vertex with the same logic as a Python ``flatmap``
  (``tidal.examples.udfs.price_order``: ``json.loads``, a dict lookup for the join).

Records/s = the rows processed after the first non-empty micro-batch committed, over the time to
the last one (the rate once running, without the query's start-up).

Run: ``tidal bench sql``. Numbers go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, query_rate, vertex_rate, write_result

RECORDS = 200_000
BATCH = 20_000
REPEATS = 3
SCHEMA = "id STRING, order_id STRING NOT NULL, sku STRING, qty INT"
SQL = (
    "SELECT _id, o.order_id, o.qty * s.unit_price AS total, s.region "
    "FROM input o JOIN skus s ON o.sku = s.sku WHERE o.qty > 0"
)
SKUS = 100


def orders() -> list[bytes]:
    return [
        json.dumps({"id": f"in:{i}", "order_id": f"o{i}", "sku": f"s{i % SKUS}", "qty": i % 4}).encode()
        for i in range(RECORDS)
    ]


def write_inputs(root: Path, lines: list[bytes]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "skus").mkdir(parents=True)
    skus = [f"s{i}" for i in range(SKUS)]
    table = pa.table(
        {"sku": skus, "unit_price": [1.0 + i / 10 for i in range(SKUS)], "region": ["eu", "us"] * (SKUS // 2)}
    )
    pq.write_table(table, root / "skus" / "skus.parquet")
    (root / "text").mkdir()
    half = BATCH // 2
    for n, at in enumerate(range(0, len(lines), half)):
        (root / "text" / f"part-{n:05d}.json").write_bytes(b"\n".join(lines[at : at + half]) + b"\n")


def plain_rate(spark: Any, root: Path, n: int) -> float:
    from pyspark.sql import functions as F  # noqa: N812

    raw = spark.readStream.schema("value STRING").option("maxFilesPerTrigger", 2).text(str(root / "text"))
    parsed = raw.select(F.from_json("value", SCHEMA).alias("r")).select("r.*").withColumnRenamed("id", "_id")
    parsed.createOrReplaceTempView("input")
    spark.read.parquet(str(root / "skus")).createOrReplaceTempView("skus")
    result = spark.sql(SQL)
    query = (
        result.writeStream.format("parquet").option("path", str(root / f"plain-{n}"))
        .option("checkpointLocation", str(root / f"plain-ck-{n}"))
        .trigger(processingTime="0.2 seconds").start()
    )  # fmt: skip
    try:
        return query_rate(query, RECORDS)
    finally:
        query.stop()


def tidal_rate(spark: Any, root: Path, n: int, lines: list[bytes], step: dict[str, Any]) -> float:
    from tidal.isb import BufferLimits
    from tidal.isb.control import ControlStore
    from tidal.isb.sqlite import SqliteStore
    from tidal.spark.batch.config import QueryConfig
    from tidal.spark.query.frames import plan_step, read_reference
    from tidal.spark.query.vertex import start_vertex
    from tidal.spec import Limits
    from tidal.spec.model import UdfSpec

    run_dir = root / f"tidal-{n}-{'sql' if 'sql' in step else 'python'}"
    db = run_dir / "pipeline.db"
    store = SqliteStore(db)
    limits = BufferLimits(max_length=2 * RECORDS)
    source = store.create("step", limits)
    store.create("out", limits)
    for at in range(0, RECORDS, 10_000):
        source.append(lines[at : at + 10_000], [f"in:{i}" for i in range(at, min(RECORDS, at + 10_000))])
    control = ControlStore(db)
    control.set_replicas("step", 2)
    udf = UdfSpec.model_validate(step)
    config = QueryConfig(
        "sqlbench", "step", str(db), str(run_dir), "step", ("out",),
        limits=Limits(read_batch_size=BATCH // 2, buffer_max_length=2 * RECORDS), udf=udf, schema=SCHEMA,
    )  # fmt: skip
    frame = None
    if config.rows:
        frame = plan_step(spark, config, {"skus": read_reference(spark, "skus", udf.reference["skus"])})
    query = start_vertex(spark, config, run_dir / "checkpoint", trigger_seconds=0.2, frame=frame)
    try:
        return vertex_rate(control, "step", query, RECORDS)
    finally:
        query.stop()
        store.close()
        control.close()


def main(out: Path = RESULTS, repeats: int = REPEATS) -> int:
    from tidal.spark.cluster.session import build_session
    from tidal.spark.query.datasource import register

    root = Path(tempfile.mkdtemp(prefix="tidal-bench-sql-"))
    lines = orders()
    write_inputs(root, lines)
    os.environ["TIDAL_SKUS"] = str(root / "skus" / "skus.parquet")  # for the Python step's workers
    spark = build_session("tidal-bench-sql", "local[2]")
    register(spark)
    jobs: dict[str, Callable[[int], float]] = {
        "plain": lambda i: plain_rate(spark, root, i),
        "sql": lambda i: tidal_rate(
            spark, root, i, lines, {"sql": SQL, "reference": {"skus": {"path": str(root / "skus")}}}
        ),
        "python": lambda i: tidal_rate(
            spark, root, i, lines, {"flatmap": "tidal.examples.udfs:price_order", "retries": 0}
        ),
    }
    rows: dict[str, list[float]] = {name: [] for name in jobs}
    try:
        jobs["plain"](-1)  # the session's first query warms the JVM: not counted
        for i in range(repeats):  # alternate, so drift on a shared machine hits all three
            for name, job in jobs.items():
                rows[name].append(job(i))
            print(
                f"round {i + 1}: " + ", ".join(f"{name} {r[-1]:,.0f} records/s" for name, r in rows.items())
            )
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    median = {name: statistics.median(r) for name, r in rows.items()}
    print()
    head = f"| job ({RECORDS:,} JSON orders: parse, filter, join, total) | records/s (median of {repeats})"
    print(f"{head} | × plain |")
    print("|---|---|---|")
    labels = {
        "plain": "plain PySpark (text files → from_json → the SQL → Parquet)",
        "sql": "Tidal SQL step (the vertex: buffer → the SQL → buffer, bad records to a dead letter)",
        "python": "Tidal Python step (the same logic as a flatmap)",
    }
    for name, label in labels.items():
        print(f"| {label} | {median[name]:,.0f} | {median[name] / median['plain']:.2f}× |")
    path = write_result("sql", {"rows": rows, "median": median}, out)
    print(f"wrote {path}")
    return 0
