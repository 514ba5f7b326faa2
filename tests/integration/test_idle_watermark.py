"""Idle watermarks and a join's watermark on real Spark (local mode): a reduce's last windows close
when its sources go quiet (``watermark.idleSource``), each once; a join's watermark is the minimum
of its inputs', so a slower input's messages are not dropped as late."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import Pipeline
from tidal.testing import delivered

from .waits import eventually

T0 = 1_700_000_000  # a multiple of 2: the 2 s windows start at T0, T0 + 2, ...
IDLE = {"threshold": "1s", "incrementBy": "2s", "stepInterval": "200ms"}
LINES = "tidal.examples.sources:LinesSource"


def _write(path: Path, events: list[tuple[float, int]]) -> None:
    with path.open("a") as f:
        f.writelines(f"{t} {value}\n" for t, value in events)


def _sums(out: Path) -> dict[tuple[str, int], int]:
    """``(key, window start)`` → the sum delivered; fails on a window delivered twice."""
    found: dict[tuple[str, int], int] = {}
    for record in delivered(out):
        key, _, bounds = record["id"].split(":", 1)[1].partition("@")
        start = int(bounds.split("-")[0]) // 1000
        assert (key, start) not in found, f"window {key}@{start} delivered twice"
        found[key, start] = int(record["payload"])
    return found


def _expected(events: list[tuple[float, int]], keyed: bool) -> dict[tuple[str, int], int]:
    sums: dict[tuple[str, int], int] = defaultdict(int)
    for t, value in events:
        key = ("even" if value % 2 == 0 else "odd") if keyed else ""
        sums[key, int(t - (t - T0) % 2)] += value
    return dict(sums)


# Numaflow's idle-source e2e, with 2 s windows: 3 s of data into the first source, none ever
# into the second; the sums of the last windows arrive only if the watermark moves on.
EVENTS = [(T0 + 0.1 * i, i + 1) for i in range(30)]


def test_numaflows_idle_source_e2e_two_sources_one_idle_the_keyed_sums_arrive_once(spark, tmp_path):
    data, quiet = tmp_path / "in.txt", tmp_path / "in-two.txt"
    _write(data, EVENTS)
    quiet.touch()
    spec = (
        Pipeline("http-idle-source", chaining=False, watermark={"maxDelay": "0s", "idleSource": IDLE})
        .source("in", user=LINES, options={"path": str(data), "timestamps": True})
        .source("in-two", user=LINES, options={"path": str(quiet), "timestamps": True})
        .pynumaflow("atoi", "tidal.examples.numaflow:even_odd")
        .reduce(
            "compute-sum",
            "tidal.examples.numaflow:reduce_sum",
            window={"fixed": {"length": "2s"}},
            keyed=True,
            partitions=2,
        )
        .sink("sink", "file", path="out.jsonl")
        .edge("in", "atoi")
        .edge("in-two", "atoi")
        .edge("atoi", "compute-sum")
        .edge("compute-sum", "sink")
        .build()
    )
    out = tmp_path / "run" / "out.jsonl"
    expected = _expected(EVENTS, keyed=True)
    assert max(start for _, start in expected) == T0 + 2  # the last window, [T0+2, T0+4), needs idling
    with PipelineRun(spec, tmp_path / "run", spark=spark, trigger_seconds=0.25) as run:

        def every_window() -> None:
            assert _sums(out) == expected

        eventually(every_window, 180, "every window's sum", run=run, poll=0.5)
        buffer = run.buffers.open("compute-sum")
        seen: list[int] = []

        def at_rest() -> None:
            """No more control rows once every window is closed: the input drains and stays
            empty (a vertex at rest may scale to zero); none was counted as a message."""
            seen.append(buffer.last_seq())
            assert buffer.stats().pending == 0
            assert len(seen) >= 3 and seen[-1] == seen[-3], seen[-3:]
            status = {s.name: s for s in run.status()}["compute-sum"]
            assert status.processed == len(EVENTS)
            assert status.watermark is not None and status.watermark >= "2023-11-14T22:13:24"  # T0 + 4

        eventually(at_rest, 120, "the reduce at rest", run=run, poll=1.0)
    assert _sums(out) == expected


# A join: two sources straight into one reduce. The fast one's messages come first, up to T0 + 9.5;
# the slow one's, older (T0 + 0.25 ... T0 + 4.25), after them: Spark's max-based watermark of one
# stream would drop them all as late.
FAST = [(T0 + 0.5 * i, i + 1) for i in range(20)]
SLOW = [(T0 + 0.25 + j, 100 + j) for j in range(5)]


def test_a_joins_watermark_is_the_minimum_of_its_inputs_and_an_idle_input_does_not_hold_it_for_good(
    spark, tmp_path
):
    fast, slow = tmp_path / "fast.txt", tmp_path / "slow.txt"
    _write(fast, FAST)
    slow.touch()
    spec = (
        Pipeline("join", chaining=False, watermark={"idleSource": IDLE})
        .source("fast", user=LINES, options={"path": str(fast), "timestamps": True})
        .source("slow", user=LINES, options={"path": str(slow), "timestamps": True})
        .reduce("sum", "tidal.examples.numaflow:reduce_sum", window={"fixed": {"length": "2s"}}, partitions=2)
        .sink("out", "file", path="out.jsonl")
        .edge("fast", "sum")
        .edge("slow", "sum")
        .edge("sum", "out")
        .build()
    )
    out = tmp_path / "run" / "out.jsonl"
    with PipelineRun(spec, tmp_path / "run", spark=spark, trigger_seconds=0.25) as run:

        def fast_in() -> None:
            assert {s.name: s for s in run.status()}["sum"].processed == len(FAST)

        eventually(fast_in, 180, "the fast input's messages in the reduce", run=run, poll=0.5)
        assert _sums(out) == {}  # the slow input, which sent nothing yet, holds every window open
        _write(slow, SLOW)

        def every_window() -> None:
            assert _sums(out) == _expected(FAST + SLOW, keyed=False)

        eventually(every_window, 180, "every window with the slow input's messages", run=run, poll=0.5)
        assert {s.name: s for s in run.status()}["sum"].processed == len(FAST) + len(SLOW)
