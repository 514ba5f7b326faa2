"""The state-partition policy on Spark (#60 part 2): a reduce vertex with ``statePartitions``,
whose stateful stage is the bottleneck of a backlog, moves its state to more partitions by
itself (no ``tidal scale``), says why in the event log, and delivers every window once with
the input's counts. The rules themselves: tests/unit/scaling/test_state_partitions.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidal.spark.batch.state_partitions import committed_partitions
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import Pipeline

from .test_reduce import _tidal_counts, _write
from .waits import eventually

pytestmark = pytest.mark.spark

T0 = 1_700_000_000
EVENTS = [(T0 + i * 0.5, i) for i in range(1, 3001)] + [(T0 + 3000, 3001)]  # 150 windows of 10 s


def _expected() -> dict[tuple[str, int], int]:
    counts: dict[tuple[str, int], int] = {}
    for t, n in EVENTS[:-1]:
        start = int(t - (t - T0) % 10)
        key = ("even" if n % 2 == 0 else "odd", start)
        counts[key] = counts.get(key, 0) + 1
    return counts


def _spec(lines: Path):
    return (
        Pipeline("policy", chaining=False, limits={"readBatchSize": 150}, controller={"intervalSeconds": 0.5})
        .source(
            "in", user="tidal.examples.sources:LinesSource", options={"path": str(lines), "timestamps": True}
        )
        .pynumaflow("key", "tidal.examples.numaflow:even_odd")
        .reduce(
            "count",
            "tidal.examples.numaflow:SlowReduceCounter",
            # 30 ms a message, in the task after the shuffle: a sleep, so the state stage stays
            # the bottleneck on a loaded box (at 8 ms, with another test on the two cores, it
            # was 41 % of a batch and the policy rightly held: a CI run, 2026-12-07)
            args=[0, 0.03],
            window={"fixed": {"length": "10s"}},
            keyed=True,
            partitions=1,
            state_partitions={"min": 1, "max": 2, "cooldownSeconds": 0},
            scale={"targetProcessingSeconds": 1, "lookbackSeconds": 5, "max": 1},
        )
        .sink("out", "file", path="out.jsonl")
        .chain("in", "key", "count", "out")
        .build()
    )


def _events(run_dir: Path, *rules: str) -> list[dict]:
    path = run_dir / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e["rule"] in rules]


def test_a_backlogged_reduce_whose_state_stage_is_the_bottleneck_moves_to_more_partitions_by_itself(
    spark, tmp_path
):
    lines, run_dir = tmp_path / "events.txt", tmp_path / "run"
    out, checkpoint = run_dir / "out.jsonl", run_dir / "checkpoints" / "count"
    _write(lines, EVENTS)
    with PipelineRun(_spec(lines), run_dir, spark=spark, trigger_seconds=0.25) as run:

        def moved() -> None:
            assert [e["inputs"]["partitions"] for e in _events(run_dir, "repartitioned")] == [2]

        eventually(moved, 300, "the policy's move to 2 partitions", run=run, poll=0.5)
        every = _expected()

        def every_window() -> None:
            assert _tidal_counts(out) == every

        eventually(every_window, 300, "every window once, after the move", run=run, poll=0.5)
        assert committed_partitions(checkpoint) == 2
    [move] = _events(run_dir, "repartitioned", "repartition-failed")
    assert move["inputs"]["by"].startswith("the partition policy (partitions-up: a backlog of"), move
    verdicts = _events(run_dir, "state-partitions")
    assert any(v["inputs"]["partitionRule"] == "partitions-up" for v in verdicts), verdicts
    up = next(v for v in verdicts if v["inputs"]["partitionRule"] == "partitions-up")
    assert up["inputs"]["stateShare"] >= 0.5 and up["inputs"]["backlogSeconds"] > 1
    share, backlog = up["inputs"]["stateShare"], up["inputs"]["backlogSeconds"]
    print(f"moved after {up['inputs']['batches']} batches, state share {share}, backlog {backlog} s; "
          f"paused {move['inputs']['pause_seconds']} s")  # fmt: skip
