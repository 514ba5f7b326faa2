"""Benchmark: delivery delay, source to sink, at fixed offered loads well below capacity.

Four jobs doing the same work (build the generator's payload, ``upper`` it once in Python,
throw it away), alternating on one ``local[2]`` session, at each load in :data:`LOADS`:

- **plain**: a Python streaming source whose rows fall due at the offered rate (:class:`DueSource`,
  what Tidal's generator does without Tidal) → ``mapInArrow`` → a Python sink that records the
  delay of every row at its batch's commit (:class:`LatencyProbe`). A row's source time is when
  it fell due. (Spark's ``rate`` source releases rows a whole second at a time, which added about
  a second to the plain job's delay: measured at 1.17 s p50 against 0.39 s for the MonoVertex.)
- **pipeline**: Tidal's three vertices (generator → ``upper`` map → blackhole sink) as a user
  writes them: chained by default into one query (:mod:`tidal.spec.chains`), 2 fixed replicas.
- **unchained**: the same with ``chain: false`` on both edges: each vertex its own query, SQLite
  buffers between them.
- **monovertex**: the same steps as one ``kind: MonoVertex`` query, 2 fixed replicas.

Tidal's delays are what its sinks record at commit (:mod:`tidal.scaling.latency`): from the
moment the generator made a message due to the commit of the sink's micro-batch that delivered
it. The probe measures the plain job the same way, so the three figures compare like with like.
All three use the same processing-time trigger (Tidal's default). Each job runs
:data:`WARMUP_S` and until its first delivery before its delays count, then :data:`WINDOW_S` (and
until something more was delivered: a busy machine is slow, not empty); the figures are p50 and p99
over every message delivered in the window.

Run: ``tidal bench latency``. Numbers go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)

from tidal.bench import RESULTS, wait_for, write_result
from tidal.scaling.latency import DelaySample, TimeSample, delays_at, pooled, time_sample
from tidal.spark.batch.admission import Range, split
from tidal.spec import Limits

LOADS = (1_000, 10_000)  # msg/s offered
WARMUP_S = 20.0
WINDOW_S = 30.0
TRIGGER_S = Limits().trigger_seconds  # Tidal's default trigger (limits.triggerSeconds), for all three
SIZE = 100
READ_BATCH = 50_000  # per replica: admission never caps a batch at these loads
REPLICAS = 2
JOBS = ("plain", "pipeline", "unchained", "monovertex")


@dataclass
class _Sample(WriterCommitMessage):
    sample: TimeSample


class _ProbeWriter(DataSourceStreamArrowWriter):
    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        import pyarrow as pa

        times = [batch.column("t") for batch in iterator if batch.num_rows]
        return _Sample(time_sample(pa.concat_arrays(times).to_numpy() if times else []))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        delays = delays_at([m.sample for m in messages if isinstance(m, _Sample)], time.time())
        if delays.count:
            with open(self.path, "a") as out:
                out.write(json.dumps({"at": delays.at, "n": delays.count, "p": delays.points}) + "\n")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        return None


class LatencyProbe(DataSource):
    """``format("latency_probe").option("path", …)``: records each committed batch's delays (its
    rows' ``t``, source time in seconds, against the commit) as a line of JSON in ``path``."""

    @classmethod
    def name(cls) -> str:
        return "latency_probe"

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        return _ProbeWriter(str(self.options["path"]))


def _read_probe(path: Path, start: float, end: float) -> list[DelaySample]:
    if not path.exists():
        return []
    out = []
    text = path.read_text()
    complete = text[: text.rfind("\n") + 1]  # a line still being written is not read yet
    for line in complete.splitlines():
        row = json.loads(line)
        if start <= row["at"] <= end:
            out.append(DelaySample(row["at"], row["n"], tuple(row["p"])))
    return out


def _plain_work(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    from tidal.examples.udfs import upper
    from tidal.spark.sources.generator import numbered_payloads

    for batch in batches:
        if batch.num_rows == 0:
            continue
        built = numbered_payloads("gen", batch.column("value").cast(pa.string()), SIZE)
        payloads = pa.array([upper(p) for p in built.to_pylist()], pa.binary())
        yield pa.RecordBatch.from_arrays([payloads, batch.column("t")], names=["payload", "t"])


class _DueReader(DataSourceStreamReader):
    """Messages fall due at ``rate`` a second from the query's start, numbered from 1; a
    micro-batch takes every message due by its trigger (Tidal's generator, without Tidal)."""

    def __init__(self, rate: float, start: float) -> None:
        self.rate = rate
        self.start = start  # an option: PySpark builds the reader anew where it reads

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        return {"n": 0}

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
        return {"n": int((time.time() - self.start) * self.rate)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return list(split(start["n"] + 1, end["n"], REPLICAS))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        assert isinstance(partition, Range)
        numbers = np.arange(partition.first, partition.last + 1, dtype=np.int64)
        due = self.start + numbers / self.rate
        yield pa.RecordBatch.from_arrays([pa.array(numbers), pa.array(due)], names=["value", "t"])


class DueSource(DataSource):
    """``format("due_rate").option("rate", …).option("start", …)``: ``value`` and ``t``, the
    second it fell due (``start`` + value / rate)."""

    @classmethod
    def name(cls) -> str:
        return "due_rate"

    def schema(self) -> str:
        return "value long, t double"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802
        return _DueReader(float(self.options["rate"]), float(self.options["start"]))


def plain_delays(spark: Any, rate: int, root: Path) -> list[DelaySample]:
    path = root / f"plain-{rate}-{time.time_ns()}.jsonl"
    query = (
        spark.readStream.format("due_rate")
        .option("rate", rate)
        .option("start", repr(time.time()))
        .load()
        .mapInArrow(_plain_work, "payload binary, t double")
        .writeStream.format("latency_probe")
        .option("path", str(path))
        .option("checkpointLocation", str(root / f"plain-{rate}-{time.time_ns()}"))
        .trigger(processingTime=f"{int(TRIGGER_S * 1000)} milliseconds")
        .queryName("plain")
        .start()
    )
    from tidal.spark.query.vertex import stop_between_batches

    try:
        time.sleep(WARMUP_S)
        wait_for(lambda: bool(_read_probe(path, 0.0, time.time())), "the plain job delivered nothing")
        start = time.time()
        time.sleep(WINDOW_S)
        wait_for(lambda: bool(_read_probe(path, start, time.time())), "the plain job delivered nothing more")
        end = time.time()
    finally:
        stop_between_batches(query)
    return _read_probe(path, start, end)


def _spec(job: str, rate: int) -> Any:
    from tidal.spec import parse_pipeline

    fixed = {"min": REPLICAS, "max": REPLICAS}
    limits = {"readBatchSize": READ_BATCH, "bufferMaxLength": 4 * REPLICAS * READ_BATCH}
    source = {"generator": {"rate": rate, "msgSize": SIZE}}
    udf = {"map": "tidal.examples.udfs:upper"}
    if job == "monovertex":
        return parse_pipeline(
            {
                "kind": "MonoVertex",
                "name": "bench",
                "limits": limits,
                "source": source,
                "transformer": udf,
                "sink": {"blackhole": {}},
                "scale": fixed,
                "replicas": REPLICAS,
            }
        )
    vertex = {"scale": fixed, "replicas": REPLICAS}
    chain = {"chain": False} if job == "unchained" else {}
    return parse_pipeline(
        {
            "name": "bench",
            "limits": limits,
            "vertices": [
                {"name": "gen", "source": source, **vertex},
                {"name": "work", "udf": udf, **vertex},
                {"name": "out", "sink": {"blackhole": {}}, **vertex},
            ],
            # ``pipeline``: chained by default (one query); ``unchained``: a query per vertex.
            "edges": [
                {"from": "gen", "to": "work", **chain},
                {"from": "work", "to": "out", **chain},
            ],
        }
    )


def tidal_delays(spark: Any, job: str, rate: int, root: Path) -> list[DelaySample]:
    from tidal.spark.run.pipeline import PipelineRun

    spec = _spec(job, rate)
    sink = spec.vertices[-1].name
    run = PipelineRun(spec, root / f"{job}-{rate}-{time.time_ns()}", spark=spark, trigger_seconds=TRIGGER_S)

    def delivered_since(since: float) -> bool:
        run.check()  # a failed query raises here instead of waiting out the deadline
        return bool(run.delivered_delays(sink, since))

    with run:
        time.sleep(WARMUP_S)
        wait_for(lambda: delivered_since(0.0), f"{sink} delivered nothing")
        start = time.time()
        time.sleep(WINDOW_S)
        wait_for(lambda: delivered_since(start), f"{sink} delivered nothing more")
        end = time.time()
        run.check()
        return [s for s in run.delivered_delays(sink, start) if s.at <= end]


def measure(spark: Any, job: str, rate: int, root: Path) -> dict[str, float]:
    samples = plain_delays(spark, rate, root) if job == "plain" else tidal_delays(spark, job, rate, root)
    whole = pooled(samples, time.time())
    return {"messages": whole.count, "p50": whole.p50, "p99": whole.p99, "max": whole.max}


def main(out: Path = RESULTS, loads: tuple[int, ...] = LOADS) -> int:
    from tidal.spark.cluster.session import build_session
    from tidal.spark.query.datasource import register

    root = Path(tempfile.mkdtemp(prefix="tidal-bench-latency-"))
    spark = build_session("tidal-bench-latency", "local[2]")
    register(spark)
    spark.dataSource.register(LatencyProbe)
    spark.dataSource.register(DueSource)
    results: dict[str, dict[str, dict[str, float]]] = {}
    try:
        for rate in loads:
            results[str(rate)] = {}
            for job in JOBS:  # one after the other, the same session: drift hits all three
                got = results[str(rate)][job] = measure(spark, job, rate, root)
                print(
                    f"{rate:,} msg/s {job}: p50 {got['p50']:.3f} s, p99 {got['p99']:.3f} s "
                    f"({got['messages']:,} messages)",
                    flush=True,
                )
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    print()
    print("| offered | job | p50 s | p99 s | p50 × plain | messages |")
    print("|---|---|---|---|---|---|")
    for load, jobs in results.items():
        plain = jobs["plain"]["p50"]
        for job, got in jobs.items():
            print(
                f"| {int(load):,} msg/s | {job} | {got['p50']:.3f} | {got['p99']:.3f} | "
                f"{got['p50'] / plain:.2f}× | {got['messages']:,.0f} |"
            )
    path = write_result("latency", results, out)
    print(f"wrote {path}")
    return 0
