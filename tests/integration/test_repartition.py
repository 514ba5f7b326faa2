"""A reduce vertex's state moved to another number of partitions while the pipeline runs
(``tidal scale RUN_DIR VERTEX --partitions N``, :mod:`tidal.spark.run.repartition`): the counts per
key and window are those of the input, no window is delivered twice, the move is an event with
its pause, and a run started again on the directory keeps the new count. And Spark's own
repartition on real checkpoints: what a failed one leaves, and undoing it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tidal.cli.serving import start_api
from tidal.spark.batch.state_partitions import (
    abandon_repartition,
    committed_partitions,
    unfinished_repartition,
)
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import Pipeline

from .test_reduce import _tidal_counts, _write
from .waits import eventually

pytestmark = pytest.mark.spark

T0 = 1_700_000_000  # windows of 10 s start at T0, T0 + 10, ...


def _events(start: float, values: range) -> list[tuple[float, int]]:
    return [(start + (i % 20) * 0.45, n) for i, n in enumerate(values)]


# Before the move: windows T0 and T0+10, closed by one message at T0+25 (window T0+20 opens).
STAGE_1 = [*_events(T0, range(1, 31)), *_events(T0 + 10, range(31, 48)), (T0 + 25, 48)]
# After it: the rest of window T0+20 (open in the state store through the move), window T0+30,
# and one far ahead that closes both.
STAGE_2 = [*_events(T0 + 21, range(49, 66)), *_events(T0 + 30, range(66, 80)), (T0 + 100, 80)]
# After the run is started again: window T0+100's rest and one that closes it.
STAGE_3 = [*_events(T0 + 101, range(81, 92)), (T0 + 200, 92)]


def _expected(events: list[tuple[float, int]], closed_before: float) -> dict[tuple[str, int], int]:
    """Counts per key (even/odd) and window start, from the input, for windows ending by ``closed_before``."""
    counts: dict[tuple[str, int], int] = {}
    for t, n in events:
        start = int(t - (t - T0) % 10)
        if start + 10 <= closed_before:
            key = ("even" if n % 2 == 0 else "odd", start)
            counts[key] = counts.get(key, 0) + 1
    return counts


def _spec(lines: Path):
    return (
        Pipeline("moves", chaining=False)
        .source(
            "in", user="tidal.examples.sources:LinesSource", options={"path": str(lines), "timestamps": True}
        )
        .pynumaflow("key", "tidal.examples.numaflow:even_odd")
        .reduce(
            "count",
            "tidal.examples.numaflow:ReduceCounter",
            args=[0],
            window={"fixed": {"length": "10s"}},
            keyed=True,
            partitions=1,
        )
        .sink("out", "file", path="out.jsonl")
        .chain("in", "key", "count", "out")
        .build()
    )


def _scale(run_dir: Path, vertex: str, partitions: int) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "tidal", "scale", str(run_dir), vertex, "--partitions", str(partitions)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    return done.returncode, " ".join((done.stdout + done.stderr).split())


def _moves(run_dir: Path) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["rule"] in ("repartitioned", "repartition-failed")]


def test_a_move_from_1_to_2_partitions_mid_run_delivers_every_window_once_with_the_inputs_counts(
    spark, tmp_path
):
    lines, run_dir = tmp_path / "events.txt", tmp_path / "run"
    out, checkpoint = run_dir / "out.jsonl", run_dir / "checkpoints" / "count"
    _write(lines, STAGE_1)
    spec = _spec(lines)
    with PipelineRun(spec, run_dir, spark=spark, trigger_seconds=0.25) as run:
        server = start_api(run, run_dir, 0, "127.0.0.1", "token", Console(quiet=True))
        try:
            before_move = _expected(STAGE_1, T0 + 25)

            def first_windows() -> None:
                assert _tidal_counts(out) == before_move

            eventually(first_windows, 240, "the windows before the move", run=run, poll=0.5)
            for vertex, asked, says in [
                ("count", 0, "at least 1 partition"),
                ("count", 3, "more than the 2 cores the run can have (master local[2])"),
                ("count", 1, "already in 1 partitions"),
                ("key", 2, "not a reduce vertex"),
            ]:
                code, text = _scale(run_dir, vertex, asked)
                assert code == 1 and "refused" in text and says in text, text
            assert _moves(run_dir) == []  # nothing moved, nothing stopped

            code, text = _scale(run_dir, "count", 2)
            assert code == 0 and "moved from 1 to 2 partitions" in text, text
            assert committed_partitions(checkpoint) == 2
            assert run.partitions is not None and run.partitions.count("count") == 2
            _write(lines, STAGE_2)
            every = _expected(STAGE_1 + STAGE_2, T0 + 100)

            def every_window() -> None:
                assert _tidal_counts(out) == every

            eventually(every_window, 240, "every window after the move", run=run, poll=0.5)
        finally:
            server.stop()
    [move] = _moves(run_dir)
    assert move["vertex"] == "count" and move["rule"] == "repartitioned"
    assert move["inputs"]["partitions_before"] == 1 and move["inputs"]["partitions"] == 2
    assert move["inputs"]["pause_seconds"] > 0 and "tidal-cli" in move["inputs"]["by"]
    print(f"pause of the move: {move['inputs']['pause_seconds']} s, Spark's repartition "
          f"{move['inputs']['repartition_seconds']} s")  # fmt: skip

    # Started again on its directory: the checkpoint's 2 partitions, not the spec's 1.
    _write(lines, STAGE_3)
    with PipelineRun(spec, run_dir, spark=spark, trigger_seconds=0.25) as run:
        assert run.partitions is not None and run.partitions.count("count") == 2
        every = _expected(STAGE_1 + STAGE_2 + STAGE_3, T0 + 200)

        def after_restart() -> None:
            assert _tidal_counts(out) == every
            progress = run.queries["count"].lastProgress
            assert progress is not None
            assert [op["numShufflePartitions"] for op in progress["stateOperators"]] == [2]

        eventually(after_restart, 240, "the windows after the restart", run=run, poll=0.5)
    assert len(_moves(run_dir)) == 1


def _rate_query(spark, checkpoint: Path, provider: str):
    from pyspark.sql import functions as F  # noqa: N812

    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
    try:
        counts = (
            spark.readStream.format("rate").option("rowsPerSecond", 20).load()
            .withWatermark("timestamp", "1 second")
            .groupBy(F.window("timestamp", "2 seconds"), (F.col("value") % 3).alias("k")).count()
        )  # fmt: skip
        return (
            counts.writeStream.format("noop").outputMode("append")
            .option("checkpointLocation", str(checkpoint)).trigger(processingTime="250 milliseconds").start()
        )  # fmt: skip
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")


def _run_batches(start, checkpoint: Path, batches: int) -> None:
    """Run the query ``start()`` makes until batch ``batches``, then stop it with every batch it
    planned committed, as a move does: a stop between two batches can still race the next
    trigger (every 250 ms here), and Spark refuses to repartition after a batch cut short."""
    from tidal.spark.run.repartition import stop_at_a_commit

    running = [start()]

    def ran() -> None:
        progress = running[0].lastProgress
        assert progress is not None and progress["batchId"] >= batches

    def restart():
        running[0] = start()
        return running[0]

    eventually(ran, 180, f"{batches} batches", query=running[0])
    assert stop_at_a_commit(lambda: running[0], restart, checkpoint) is None


def test_a_failed_repartition_leaves_an_unfinished_batch_that_undoing_lets_the_query_run_on_its_old_count(
    spark, tmp_path
):
    """Spark refuses HDFS-backed state (Tidal's reduce vertices use RocksDB); the refusal still
    wrote the repartition's offset entry, and Spark then refuses to start the query."""
    from tidal.spark.query.vertex import ROCKSDB
    from tidal.spark.run.repartition import repartition, spark_reason

    hdfs = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    checkpoint = tmp_path / "checkpoint"
    _run_batches(lambda: _rate_query(spark, checkpoint, hdfs), checkpoint, 3)
    assert committed_partitions(checkpoint) == 2 and unfinished_repartition(checkpoint) is None
    with pytest.raises(Exception) as refused:
        repartition(spark, checkpoint, 3)  # the session stays active for the tests after this one
    assert spark_reason(refused.value).startswith(
        "[STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER]"
    ), spark_reason(refused.value)
    unfinished = unfinished_repartition(checkpoint)
    assert unfinished is not None and (unfinished.before, unfinished.after) == (2, 3)
    assert abandon_repartition(checkpoint, unfinished)
    assert unfinished_repartition(checkpoint) is None
    # the checkpoint's provider wins
    _run_batches(lambda: _rate_query(spark, checkpoint, ROCKSDB), checkpoint, unfinished.batch + 1)
    assert committed_partitions(checkpoint) == 2

    rocks = tmp_path / "rocks"
    _run_batches(lambda: _rate_query(spark, rocks, ROCKSDB), rocks, 3)
    repartition(spark, rocks, 3)
    assert committed_partitions(rocks) == 3 and unfinished_repartition(rocks) is None


def test_a_repartition_a_killed_driver_left_unfinished_is_completed_at_the_next_start_exactly_once(
    spark, tmp_path
):
    """What a driver killed inside Spark's repartition leaves on disk, made certain rather than
    timed: the vertex's query stopped between batches (the move's first step), Spark's repartition
    batch planned and its state written, its commit not (``commits/<n>`` removed). Spark refuses to
    start a query from there; the next run completes the move to the same count, as Spark asks."""
    from tidal.isb.control import ControlStore
    from tidal.spark.batch.state_partitions import last_batch
    from tidal.spark.run.repartition import RECORD_KEY, repartition

    lines, run_dir = tmp_path / "events.txt", tmp_path / "run"
    out, checkpoint = run_dir / "out.jsonl", run_dir / "checkpoints" / "count"
    _write(lines, STAGE_1)
    spec = _spec(lines)
    with PipelineRun(spec, run_dir, spark=spark, trigger_seconds=0.25) as run:
        before_move = _expected(STAGE_1, T0 + 25)

        def first_windows() -> None:
            assert _tidal_counts(out) == before_move

        eventually(first_windows, 240, "the windows before the move", run=run, poll=0.5)
    control = ControlStore(run_dir / "pipeline.db", spec.buffers.durability)
    control.set_meta(RECORD_KEY + "count", json.dumps({"count": 1, "moving_to": 2}))
    control.close()
    repartition(spark, checkpoint, 2)
    batch = last_batch(checkpoint / "commits")
    assert batch is not None
    (checkpoint / "commits" / str(batch)).unlink()
    (checkpoint / "commits" / f".{batch}.crc").unlink(missing_ok=True)
    unfinished = unfinished_repartition(checkpoint)
    assert unfinished is not None and (unfinished.before, unfinished.after) == (1, 2)

    _write(lines, STAGE_2)
    with PipelineRun(spec, run_dir, spark=spark, trigger_seconds=0.25) as run:
        assert unfinished_repartition(checkpoint) is None and committed_partitions(checkpoint) == 2
        every = _expected(STAGE_1 + STAGE_2, T0 + 100)

        def every_window() -> None:
            assert _tidal_counts(out) == every
            progress = run.queries["count"].lastProgress
            assert progress is not None
            assert [op["numShufflePartitions"] for op in progress["stateOperators"]] == [2]

        eventually(every_window, 240, "every window after the completed move", run=run, poll=0.5)
    [move] = _moves(run_dir)
    assert move["rule"] == "repartitioned" and move["inputs"]["by"] == "restart"
    assert "driver stopped during Spark's repartition" in move["reason"]


def test_a_move_spark_refuses_leaves_the_vertex_on_its_old_count_with_spark_s_reason_and_a_back_off(
    spark, tmp_path, monkeypatch
):
    """A checkpoint an older Tidal began keeps Spark's HDFS-backed state store, which Spark's
    repartition refuses: the move is undone, the vertex runs on, exactly once, and says why."""
    import tidal.spark.run.pipeline as pipeline_module

    lines, run_dir = tmp_path / "events.txt", tmp_path / "run"
    out, checkpoint = run_dir / "out.jsonl", run_dir / "checkpoints" / "count"
    _write(lines, STAGE_1)
    spec = _spec(lines)
    with monkeypatch.context() as older_tidal:  # the state store reduce vertices had before #60
        older_tidal.setattr(
            pipeline_module,
            "ROCKSDB",
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
        )
        with PipelineRun(spec, run_dir, spark=spark, trigger_seconds=0.25) as run:
            before_move = _expected(STAGE_1, T0 + 25)

            def first_windows() -> None:
                assert _tidal_counts(out) == before_move

            eventually(first_windows, 240, "the windows before the move", run=run, poll=0.5)
    with PipelineRun(spec, run_dir, spark=spark, trigger_seconds=0.25) as run:
        server = start_api(run, run_dir, 0, "127.0.0.1", "token", Console(quiet=True))
        try:
            code, text = _scale(run_dir, "count", 2)
            assert (
                code == 1 and "UNSUPPORTED_PROVIDER" in text and "runs on its 1 partitions again" in text
            ), text
            assert committed_partitions(checkpoint) == 1 and unfinished_repartition(checkpoint) is None
            code, text = _scale(run_dir, "count", 2)  # at once: the back-off refuses it, nothing stops
            assert code == 1 and "last move failed" in text, text
            _write(lines, STAGE_2)
            every = _expected(STAGE_1 + STAGE_2, T0 + 100)

            def every_window() -> None:
                assert _tidal_counts(out) == every

            eventually(every_window, 240, "every window after the refused move", run=run, poll=0.5)
        finally:
            server.stop()
    [move] = _moves(run_dir)
    assert move["rule"] == "repartition-failed" and move["inputs"]["partitions"] == 1
    assert "HDFSBackedStateStoreProvider is not supported" in move["reason"]
    assert move["inputs"]["pause_seconds"] > 0
