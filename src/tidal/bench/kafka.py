"""Benchmark: records/s from Kafka → map → Parquet, Tidal against a plain PySpark job.

The broker is librdkafka's mock cluster (no real broker installs here, see docs/kafka.md), one
topic of 4 partitions holding ``RECORDS`` messages of 100 bytes. Both jobs run on the same local
SparkSession (``local[2]``), alternating, ``REPEATS`` times each, each from offset 0 with its own
consumer group:

- **plain**: one query. A Python streaming data source over ``confluent-kafka`` that reads the
  topic the same way as Tidal's (offset ranges per partition, ``BATCH`` messages a micro-batch,
  each task consuming its ranges) → ``mapInArrow`` with ``tidal.examples.udfs.upper`` per record
  → ``foreachBatch`` writing Parquet. No buffers, no exactly-once bookkeeping.
- **tidal**: a pipeline of three vertices (Kafka source, ``upper`` map, Parquet sink with
  ``format: bytes``), 2 replicas each (autoscaling off), ``readBatchSize`` ``BATCH / 2`` (so a
  micro-batch holds ``BATCH`` messages, as the plain job's): what a user gets, chained by
  default into one query (:mod:`tidal.spec.chains`), exactly once into the table.
- **unchained**: the same with ``chain: false`` on both edges: a query per vertex, SQLite
  buffers between them.

Records/s = the records written between the first time the table has rows and the last record,
over that time: the rate once every query runs, without the queries' start-up (one query for
the plain job, three for Tidal), which the printed "to the last record" column includes.

Run: ``tidal bench kafka``. Numbers go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, write_result

RECORDS = 120_000  # 30,000 a partition: the mock broker keeps about 40,000 100-byte records each
BATCH = 20_000
REPEATS = 3
PARTITIONS = 4  # what the mock broker creates a topic with
TOPIC = "bench"


class MockBroker:
    """librdkafka's mock cluster, alive as long as this object."""

    def __init__(self) -> None:
        from confluent_kafka import Producer

        self._holder = Producer({"test.mock.num.brokers": 1, "log_level": 2})
        brokers = self._holder.list_topics(timeout=10).brokers
        self.bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers.values())

    def fill(self, records: int) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20, "log_level": 2})
        for i in range(records):
            value = f"order {i:012d} ".ljust(100, ".").encode()
            while True:
                try:
                    producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(60) == 0


def _plain_source(bootstrap: str) -> Any:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class Ranges(InputPartition):
        def __init__(self, ranges: list[tuple[int, int, int]]) -> None:
            self.ranges = ranges

    class Reader(DataSourceStreamReader):
        def _consumer(self) -> Any:
            from confluent_kafka import Consumer

            return Consumer(
                {"bootstrap.servers": bootstrap, "group.id": "plain", "enable.auto.commit": False}
            )

        def initialOffset(self) -> dict[str, int]:  # noqa: N802
            return {str(p): 0 for p in range(PARTITIONS)}

        def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
            from confluent_kafka import TopicPartition

            from tidal.spark.sources.kafka import share

            c = self._consumer()
            ends = {
                p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1] for p in range(PARTITIONS)
            }
            c.close()
            lag = {p: ends[p] - start[str(p)] for p in ends}
            take = share(lag, BATCH)
            return {str(p): start[str(p)] + take[p] for p in ends}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Any]:
            from tidal.spark.sources.kafka import split_ranges

            ranges = [
                (p, start[str(p)], end[str(p)] - 1) for p in range(PARTITIONS) if end[str(p)] > start[str(p)]
            ]
            return [Ranges(t.ranges) for t in split_ranges(ranges, 2)]

        def read(self, partition: Any) -> Iterator[Any]:
            import pyarrow as pa

            for p, a, b in partition.ranges:
                yield pa.RecordBatch.from_arrays([_read(bootstrap, p, a, b)], names=["value"])

        def commit(self, end: dict[str, int]) -> None:
            return None

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "plainkafka"

        def schema(self) -> str:
            return "value binary"

        def streamReader(self, schema: Any) -> Any:  # noqa: N802
            return Reader()

    return Source


def _read(bootstrap: str, partition: int, first: int, last: int) -> Any:
    """The same task-side read as Tidal's (``tidal.spark.sources.kafka.read_range``), payloads only."""
    from tidal.spark.batch.config import QueryConfig
    from tidal.spark.sources.kafka import read_range
    from tidal.spec.model import KafkaSourceSpec, SourceSpec

    source = SourceSpec(kafka=KafkaSourceSpec(bootstrap_servers=bootstrap, topic=TOPIC, group_id="plain"))
    config = QueryConfig("bench", "plain", "", "", None, source=source)
    return read_range(config, partition, first, last).column("payload")


def _upper(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    from tidal.examples.udfs import upper

    for batch in batches:
        values = [upper(v) for v in batch.column("value").to_pylist()]
        yield pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], names=["value"])


def _measure(began: float, count: Callable[[], int], check: Callable[[], None]) -> tuple[float, float]:
    """Poll ``count()`` (rows in the table) until every record is there: (records/s once running,
    records/s from ``began`` to the last record). ``check()`` raises if the job failed."""
    first: tuple[float, int] | None = None
    while True:
        rows, now = count(), time.monotonic()
        if rows and first is None:
            first = (now, rows)
        if rows >= RECORDS:
            assert first is not None
            overall = RECORDS / (now - began)
            if first[1] >= RECORDS:  # all of it in the first sighting (one batch, a slow poll):
                return overall, overall  # no "once running" to tell apart; the whole is its bound
            return (RECORDS - first[1]) / (now - first[0]), overall
        check()
        time.sleep(0.2)


def plain_rate(spark: Any, broker: MockBroker, root: Path, n: int) -> tuple[float, float]:
    import pyarrow.parquet as pq

    spark.dataSource.register(_plain_source(broker.bootstrap))
    out = root / f"plain-{n}"

    def write(df: Any, batch_id: int) -> None:
        df.write.mode("append").parquet(str(out))

    began = time.monotonic()
    query = (
        spark.readStream.format("plainkafka").load().mapInArrow(_upper, "value binary")
        .writeStream.foreachBatch(write).option("checkpointLocation", str(root / f"plain-ck-{n}"))
        .trigger(processingTime="0.2 seconds").start()
    )  # fmt: skip

    def count() -> int:
        return sum(pq.read_metadata(f).num_rows for f in (out.glob("*.parquet") if out.exists() else []))

    def check() -> None:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))

    try:
        return _measure(began, count, check)
    finally:
        query.stop()


def tidal_rate(
    spark: Any, broker: MockBroker, root: Path, n: int, *, chaining: bool = True
) -> tuple[float, float]:
    import pyarrow.parquet as pq

    from tidal.spark.run.pipeline import PipelineRun
    from tidal.spark.sinks.tables import committed_files
    from tidal.spec import parse_pipeline

    job = "tidal" if chaining else "unchained"
    run_dir = root / f"{job}-{n}"
    fixed: dict[str, Any] = {"replicas": 2, "scale": {"disabled": True}}
    kafka = {"bootstrapServers": broker.bootstrap, "topic": TOPIC, "groupId": f"{job}-{n}"}
    chain: dict[str, Any] = {} if chaining else {"chain": False}
    spec = parse_pipeline(
        {
            "name": "kbench",
            "limits": {"readBatchSize": BATCH // 2, "bufferMaxLength": 4 * BATCH},
            "vertices": [
                {"name": "in", **fixed, "source": {"kafka": kafka}},
                {"name": "work", **fixed, "udf": {"map": "tidal.examples.udfs:upper"}},
                {"name": "out", **fixed, "sink": {"parquet": {"path": "table", "format": "bytes"}}},
            ],
            "edges": [{"from": "in", "to": "work", **chain}, {"from": "work", "to": "out", **chain}],
        }
    )  # fmt: skip
    began = time.monotonic()
    with PipelineRun(spec, run_dir, spark=spark, trigger_seconds=0.2) as run:
        return _measure(
            began,
            lambda: sum(pq.read_metadata(f).num_rows for f in committed_files(run_dir / "table")),
            run.check,
        )


def main(out: Path = RESULTS, repeats: int = REPEATS) -> int:
    from tidal.spark.cluster.session import build_session

    root = Path(tempfile.mkdtemp(prefix="tidal-bench-kafka-"))
    broker = MockBroker()
    began = time.monotonic()
    broker.fill(RECORDS)
    print(f"produced {RECORDS:,} records in {time.monotonic() - began:.1f} s")
    spark = build_session("tidal-bench-kafka", "local[2]")
    rows: dict[str, list[tuple[float, float]]] = {"plain": [], "tidal": [], "unchained": []}
    try:
        plain_rate(spark, broker, root, -1)  # the session's first query warms the JVM: not counted
        for i in range(repeats):  # alternate, so drift on a shared machine hits both
            rows["plain"].append(plain_rate(spark, broker, root, i))
            rows["tidal"].append(tidal_rate(spark, broker, root, i))
            rows["unchained"].append(tidal_rate(spark, broker, root, i, chaining=False))
            print(
                f"round {i + 1}: "
                + ", ".join(
                    f"{job} {r[-1][0]:,.0f} records/s ({r[-1][1]:,.0f} from the start)"
                    for job, r in rows.items()
                ),
                flush=True,
            )
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    median = {
        name: (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        for name, runs in rows.items()
    }
    (plain, plain_all), (tidal, tidal_all) = median["plain"], median["tidal"]
    unchained, unchained_all = median["unchained"]
    print()
    head = f"| job (Kafka → upper → Parquet, {RECORDS:,} records) | records/s once running"
    print(f"{head} (median of {repeats}) | records/s from the start |")
    print("|---|---|---|")
    plain_job = "plain PySpark (Python Kafka source → mapInArrow → foreachBatch Parquet)"
    print(f"| {plain_job} | {plain:,.0f} | {plain_all:,.0f} |")
    print(f"| Tidal (3 vertices chained: one query, exactly once) | {tidal:,.0f} | {tidal_all:,.0f} |")
    print(f"| Tidal (chain: false: 3 queries, SQLite buffers) | {unchained:,.0f} | {unchained_all:,.0f} |")
    print(f"\nTidal / plain = {tidal / plain:.2f}× once running, {tidal_all / plain_all:.2f}× from the start")
    print(
        f"unchained / plain = {unchained / plain:.2f}× once running, "
        f"{unchained_all / plain_all:.2f}× from the start"
    )
    result = {"rows": rows, "median": median, "ratio": tidal / plain, "unchained_ratio": unchained / plain}
    path = write_result("kafka", result, out)
    print(f"wrote {path}")
    return 0
