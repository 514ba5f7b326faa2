"""Benchmark: messages/s through generator → Python map → blackhole, Tidal against plain PySpark.

Both run on the same local SparkSession (``local[2]``), alternating, ``REPEATS`` times each:

- **plain**: Spark's ``rate-micro-batch`` source → ``mapInArrow`` with the same per-message Python
  work (build the generator's payload, ``tidal.examples.udfs.upper``) → the ``noop`` sink. One
  query, no buffers, no delivery guarantee beyond Spark's own.
- **monovertex**: the same steps as one ``kind: MonoVertex`` query (source, transformer and sink
  in one writer task, no buffers), 2 replicas.
- **tidal**: a Tidal pipeline of three vertices (generator, ``upper`` map, blackhole sink) with 2
  replicas (autoscaling off, so the figure is throughput, not a policy), as a user writes it:
  chained by default (:mod:`tidal.spec.chains`), so the three run as one query.
- **unchained**: the same pipeline with ``chain: false`` on both edges: each vertex its own
  query, SQLite buffers between them, batches de-duplicated, inputs trimmed on commit.
  ``readBatchSize`` is 250,000 per replica: each query pays a fixed cost per micro-batch
  (Spark's offset and commit logs, planning, scheduling, a Python worker to create the writer),
  so throughput needs large micro-batches. Numaflow's default of 500 is for latency.
- **unchained, os**: the same under ``buffers.durability: os`` (:mod:`tidal.isb.durability`),
  beside the default ``sync``, which syncs every segment, its name, SQLite's WAL and Spark's
  offset entry once per micro-batch; and both again at Numaflow's ``readBatchSize`` of 500
  (**small**), where a micro-batch's syncs are shared by 1,000 messages instead of 500,000.

**The same batches for both**: every micro-batch of either job holds ``REPLICAS × READ_BATCH``
(500,000) messages, and both sources always have that many ready (the generator is offered
20M msg/s and admits one batch's worth; ``rate-micro-batch`` makes a batch of that size at every
trigger), so the figure is capacity at equal batch size.

Both build payloads with :func:`tidal.spark.sources.generator.generator_payloads` (Arrow kernels) and
call ``upper`` once per message, so the Python work per message is the same.

Throughput = messages finished by the last step over a window after a warm-up. A second
measurement gives the **fixed cost per micro-batch**: the median trigger duration of batches of
a handful of messages (plain: the whole query, 2 rows a batch; tidal: the map vertex's query at
4 msg/s, whose Spark ``numInputRows`` counts tasks, not messages).

Run: ``tidal bench throughput``. Numbers go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, wait_for, write_result
from tidal.examples.udfs import upper
from tidal.spark.query.vertex import stop_between_batches
from tidal.spark.sources.generator import generator_payload, generator_payloads

REPEATS = 3
WARMUP_S = 10.0
WINDOW_S = 20.0
OFFERED = 20_000_000  # msg/s offered to Tidal's generator: more than it can take (the MonoVertex
# reached 2M msg/s when 2M were offered, so 2M measured the offer, not the capacity)
SIZE = 100
READ_BATCH = 250_000  # per replica per micro-batch (Tidal): big batches amortize the fixed cost
SMALL_BATCH = 500  # Numaflow's default readBatchSize: the most syncs per message
REPLICAS = 2  # per Tidal vertex; the plain job's batches hold REPLICAS × READ_BATCH rows
# Every query's trigger, for all three jobs: shorter than any batch of 500,000 takes, so no job
# waits for its trigger. (At 0.5 s the plain job could not pass 2 × 500,000 = 1M msg/s, and at
# 0.25 s the MonoVertex stopped at 2M: they measured the trigger, not the job.)
TRIGGER_S = 0.05


def _plain_work(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    for batch in batches:
        values = batch.column("value")
        if len(values) == 0:
            continue
        # The same work as Tidal's generator and map: build the payloads, then upper each one.
        numbers = values.to_numpy()
        first, last = int(numbers[0]), int(numbers[-1])
        if last - first + 1 == len(numbers):
            built = generator_payloads("gen", first, last, SIZE)
        else:  # not contiguous (never seen from the rate source, but be exact)
            built = pa.array([generator_payload("gen", int(v), SIZE) for v in numbers], pa.binary())
        payloads = [upper(p) for p in built.to_pylist()]
        yield pa.RecordBatch.from_arrays([pa.array(payloads, pa.binary())], names=["payload"])


def _plain_query(spark: Any, rows_per_batch: int, checkpoint: Path) -> Any:
    """``rate-micro-batch``: a fixed number of rows per micro-batch, however long a batch takes,
    so the plain job runs batches of the same size as Tidal's (``rate`` sizes its batches by the
    clock: once the job falls behind they grow without bound, and a 20 s window then holds
    two or three batches; its rounds ranged from 400k to 900k msg/s)."""
    return (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", 2)
        .load()
        .mapInArrow(_plain_work, "payload binary")
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{int(TRIGGER_S * 1000)} milliseconds")
        .queryName("plain")
        .start()
    )


def _rows_in_window(query: Any, start: float, end: float) -> int:
    """Rows of the batches that finished within [start, end] (Spark's progress timestamps)."""
    from datetime import datetime

    total = 0
    for p in query.recentProgress:
        ts = datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
        finished = ts + p.batchDuration / 1000
        if start <= finished <= end:
            total += p.numInputRows
    return total


def plain_rate(spark: Any, root: Path) -> float:
    query = _plain_query(spark, REPLICAS * READ_BATCH, root / f"plain-{time.time_ns()}")
    try:
        time.sleep(WARMUP_S)
        wait_for(
            lambda: any(p.numInputRows > 0 for p in query.recentProgress), "the plain job finished no batch"
        )
        start = time.time()
        time.sleep(WINDOW_S)
        wait_for(
            lambda: _rows_in_window(query, start, time.time()) > 0,
            "the plain job finished no batch in the window",
        )
        end = time.time()
        return _rows_in_window(query, start, end) / (end - start)
    finally:
        stop_between_batches(query)


def _tidal_spec(rate: float, read_batch: int, *, chaining: bool = True, durability: str = "sync") -> Any:
    from tidal.spec import Pipeline

    fixed = {"disabled": True}
    return (
        Pipeline(
            "bench",
            limits={"readBatchSize": read_batch, "bufferMaxLength": max(400_000, 4 * read_batch)},
            buffers={"durability": durability},
            chaining=chaining,
        )
        .source("gen", generator={"rate": rate, "msgSize": SIZE}, scale=fixed, replicas=REPLICAS)
        .map("work", "tidal.examples.udfs:upper", scale=fixed, replicas=REPLICAS)
        .sink("out", "blackhole", scale=fixed, replicas=REPLICAS)
        .build()
    )


def _mono_spec(rate: float, read_batch: int) -> Any:
    """The same steps as one ``kind: MonoVertex`` query (no buffers), 2 fixed replicas."""
    from tidal.spec import parse_pipeline

    return parse_pipeline(
        {
            "kind": "MonoVertex",
            "name": "bench",
            "limits": {"readBatchSize": read_batch},
            "source": {"generator": {"rate": rate, "msgSize": SIZE}},
            "transformer": {"map": "tidal.examples.udfs:upper"},
            "sink": {"blackhole": {}},
            "scale": {"disabled": True},
            "replicas": REPLICAS,
        }
    )


def tidal_rate(
    spark: Any,
    root: Path,
    mono: bool = False,
    *,
    chaining: bool = True,
    durability: str = "sync",
    read_batch: int | None = None,
) -> float:
    """Messages/s out of the last step: the three-vertex pipeline (chained into one query by
    default, or each vertex its own query with ``chaining=False``), or the MonoVertex."""
    from tidal.spark.run.pipeline import PipelineRun

    read_batch = read_batch or READ_BATCH  # read when called: the tests make it small
    spec = (
        _mono_spec(OFFERED, read_batch)
        if mono
        else _tidal_spec(OFFERED, read_batch, chaining=chaining, durability=durability)
    )
    last = spec.vertices[-1].name
    run = PipelineRun(spec, root / f"tidal-{time.time_ns()}", spark=spark, trigger_seconds=TRIGGER_S)
    with run:
        assert run.control is not None
        control = run.control

        def delivered_past(count: int) -> bool:
            run.check()  # a failed query raises here instead of waiting out the deadline
            return bool(control.processed(last) > count)

        time.sleep(WARMUP_S)
        wait_for(lambda: delivered_past(0), f"{last} delivered nothing")
        before, start = control.processed(last), time.time()
        time.sleep(WINDOW_S)
        wait_for(lambda: delivered_past(before), f"{last} delivered nothing more")
        after, end = control.processed(last), time.time()
        run.check()
    return (after - before) / (end - start)


def _median_trigger_ms(query: Any, most_rows: int = 20) -> float | None:
    small = [p.batchDuration for p in query.recentProgress if 0 < p.numInputRows <= most_rows]
    return statistics.median(small) if small else None


def fixed_costs(spark: Any, root: Path, seconds: float = 15.0) -> dict[str, float | None]:
    from tidal.spark.run.pipeline import PipelineRun

    query = _plain_query(spark, 2, root / "plain-fixed")
    try:
        time.sleep(seconds)
        plain = _median_trigger_ms(query)
    finally:
        stop_between_batches(query)
    with PipelineRun(_tidal_spec(4, READ_BATCH, chaining=False), root / "tidal-fixed", spark=spark) as run:
        time.sleep(seconds)
        tidal = _median_trigger_ms(run.queries["work"])  # one hop: a vertex's own query
    return {"plain_ms": plain, "tidal_ms": tidal}


def main(out: Path = RESULTS, repeats: int = REPEATS) -> int:
    from tidal.spark.cluster.session import build_session

    root = Path(tempfile.mkdtemp(prefix="tidal-bench-"))
    spark = build_session("tidal-bench-throughput", "local[2]")
    rows: dict[str, list[float]] = {
        "plain": [],
        "tidal": [],
        "unchained": [],
        "unchained_os": [],
        "small": [],
        "small_os": [],
        "monovertex": [],
    }
    try:
        for i in range(repeats):  # alternate, so drift on a shared machine hits every job
            rows["plain"].append(plain_rate(spark, root))
            rows["tidal"].append(tidal_rate(spark, root))
            rows["unchained"].append(tidal_rate(spark, root, chaining=False))
            rows["unchained_os"].append(tidal_rate(spark, root, chaining=False, durability="os"))
            rows["small"].append(tidal_rate(spark, root, chaining=False, read_batch=SMALL_BATCH))
            rows["small_os"].append(
                tidal_rate(spark, root, chaining=False, read_batch=SMALL_BATCH, durability="os")
            )
            rows["monovertex"].append(tidal_rate(spark, root, mono=True))
            print(
                f"round {i + 1}: "
                + ", ".join(f"{job} {values[-1]:,.0f} msg/s" for job, values in rows.items()),
                flush=True,
            )
        fixed = fixed_costs(spark, root)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    plain, tidal = statistics.median(rows["plain"]), statistics.median(rows["tidal"])
    mono = statistics.median(rows["monovertex"])
    unchained = statistics.median(rows["unchained"])
    durable = {job: statistics.median(rows[job]) for job in ("unchained_os", "small", "small_os")}
    print()
    print(f"| job | msg/s (median of {repeats}) | fixed cost per micro-batch |")
    print("|---|---|---|")
    plain_job = "plain PySpark (rate-micro-batch → mapInArrow → noop)"
    print(f"| {plain_job} | {plain:,.0f} | {fixed['plain_ms'] or 0:,.0f} ms |")
    print(f"| Tidal (3 vertices, chained: one query) | {tidal:,.0f} | |")
    hop = f"{fixed['tidal_ms'] or 0:,.0f} ms"
    print(f"| Tidal (3 vertices, chain: false: SQLite buffers) | {unchained:,.0f} | {hop} |")
    print(f"| Tidal MonoVertex (one query) | {mono:,.0f} | |")
    print("\n| durability (3 vertices, chain: false) | sync (default) msg/s | os msg/s | sync / os |")
    print("|---|---|---|---|")
    for label, sync, loose in (
        (f"readBatchSize {READ_BATCH:,}", unchained, durable["unchained_os"]),
        (f"readBatchSize {SMALL_BATCH:,}", durable["small"], durable["small_os"]),
    ):
        print(f"| {label} | {sync:,.0f} | {loose:,.0f} | {sync / loose:.2f} |")
    print(
        f"\nTidal / plain = {tidal / plain:.2f}×; unchained / plain = {unchained / plain:.2f}×; "
        f"MonoVertex / plain = {mono / plain:.2f}×"
    )
    path = write_result(
        "throughput",
        {
            "rows": rows,
            "median": {"plain": plain, "tidal": tidal, "unchained": unchained, "monovertex": mono},
            "ratio": tidal / plain,
            "unchained_ratio": unchained / plain,
            "monovertex_ratio": mono / plain,
            "durability": {
                "sync_over_os": unchained / durable["unchained_os"],
                "small_sync_over_os": durable["small"] / durable["small_os"],
                **durable,
            },
            "fixed": fixed,
        },
        out,
    )
    print(f"wrote {path}")
    return 0
