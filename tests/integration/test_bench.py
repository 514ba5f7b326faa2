"""The benchmarks run end to end (tiny sizes): their numbers are in docs/, not asserted here."""

from __future__ import annotations

import time

import pytest

from tidal.bench import buffers


@pytest.mark.parametrize("backend", ["sqlite", "jetstream"])
def test_buffer_benchmark_runs_every_variant_and_counts_every_message(backend, tmp_path, monkeypatch):
    monkeypatch.setitem(buffers.COUNTS, backend, 2000)
    rows = buffers.measure(backend, tmp_path, repeats=1)
    assert [(r["op"], r["processes"]) for r in rows] == [
        ("append", 1),
        ("append", 2),
        ("read", 1),
        ("read", 2),
    ]
    for row in rows:
        assert row["tidal_msgs_per_s"] > 0 and row["keyed_msgs_per_s"] > 0 and row["bare_msgs_per_s"] > 0
        assert ("ratio_ids" in row) == (backend == "sqlite")


@pytest.mark.spark
def test_throughput_benchmark_measures_both_jobs(spark, tmp_path, monkeypatch):
    """Short windows and small batches: both jobs run on the session and deliver messages. No
    warm-up to speak of: each window starts once its job delivered, however long that takes."""
    from tidal.bench import throughput

    monkeypatch.setattr(throughput, "WARMUP_S", 1.0)
    monkeypatch.setattr(throughput, "WINDOW_S", 2.0)
    monkeypatch.setattr(throughput, "READ_BATCH", 2000)
    assert throughput.plain_rate(spark, tmp_path) > 0
    assert throughput.tidal_rate(spark, tmp_path) > 0  # chained: one query
    assert throughput.tidal_rate(spark, tmp_path, chaining=False) > 0  # a query per vertex


@pytest.mark.spark
def test_kafka_benchmark_reads_every_record_in_both_jobs(spark, tmp_path, monkeypatch):
    """A small topic: both jobs write every record to their Parquet tables and report rates."""
    from tidal.bench import kafka

    monkeypatch.setattr(kafka, "RECORDS", 8000)
    monkeypatch.setattr(kafka, "BATCH", 2000)
    broker = kafka.MockBroker()
    broker.fill(8000)
    running, overall = kafka.plain_rate(spark, broker, tmp_path, 0)
    assert running > 0 and overall > 0
    running, overall = kafka.tidal_rate(spark, broker, tmp_path, 0)
    assert running > 0 and overall > 0


def test_http_benchmark_drives_every_way_in_with_hey(tmp_path):
    """hey (Debian's, installed by the Makefile) against the bare receiver and the request path in
    and out of the activator: every way in answers, and the bare receiver is the one measured."""
    from tidal.bench import http

    table = http.overhead(tmp_path, seconds=1, repeats=1)
    ways = {f"{where}, cc {cc}" for where in ("in path", "out of path") for cc in (0, 10)}
    assert set(table) == {"bare", *ways}
    for variant, row in table.items():
        assert row["errors"] == 0, variant
        assert row["max_req_per_s"] > 0 and row["p50_ms"] <= row["p99_ms"], (variant, row)


def test_percentile_is_the_nearest_rank():
    from tidal.bench.http import percentile

    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 99)) == (50.0, 95.0, 99.0)


@pytest.mark.spark
def test_throughput_benchmark_measures_the_monovertex(spark, tmp_path, monkeypatch):
    from tidal.bench import throughput

    monkeypatch.setattr(throughput, "WARMUP_S", 1.0)
    monkeypatch.setattr(throughput, "WINDOW_S", 2.0)
    monkeypatch.setattr(throughput, "READ_BATCH", 2000)
    assert throughput.tidal_rate(spark, tmp_path, mono=True) > 0


@pytest.mark.spark
def test_latency_benchmark_measures_every_delivered_message_of_the_three_jobs(spark, tmp_path, monkeypatch):
    """Short windows at 500 msg/s: each job delivers about WINDOW_S × 500 messages, each with a
    delay from the second it fell due; the probe sink measures the plain job the same way."""
    from tidal.bench import latency

    # Each window starts once its job delivered (a cold query compiles first), so no warm-up.
    monkeypatch.setattr(latency, "WARMUP_S", 1.0)
    monkeypatch.setattr(latency, "WINDOW_S", 3.0)
    spark.dataSource.register(latency.LatencyProbe)
    spark.dataSource.register(latency.DueSource)
    for job in latency.JOBS:
        began = time.time()
        got = latency.measure(spark, job, 500, tmp_path)
        # Never more than the source made (500/s since it began): nothing doubled. How many
        # arrive in the window is the machine's business, not the test's.
        assert 0 < got["messages"] <= 500 * (time.time() - began), (job, got)
        assert 0 < got["p50"] <= got["p99"], (job, got)


@pytest.mark.nats
def test_the_durability_rows_measure_both_settings_on_both_backends(tmp_path):
    rows = buffers.durability_rows(tmp_path, repeats=1, count=2000)
    assert {(r["backend"], r["processes"]) for r in rows} == {
        (backend, procs) for backend in ("sqlite", "jetstream") for procs in (1, 2)
    }
    assert all(r["sync_msgs_per_s"] > 0 and r["os_msgs_per_s"] > 0 for r in rows), rows
