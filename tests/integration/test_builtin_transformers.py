"""Numaflow's builtin ``eventTimeExtractor`` on Spark: a reduce downstream windows each message by
the time read from its payload, not by when the source read it (Numaflow's transformer e2e test,
extract-event-time-from-payload.yaml, with a fixed window after it)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import parse_pipeline
from tidal.testing import delivered

from .waits import eventually

T0 = 1_700_000_000  # 2023-11-14T22:13:20Z, a multiple of 10: windows start at T0, T0 + 10, ...
# Three messages in [T0, T0+10), two in [T0+10, T0+20), one far ahead that closes both; and one
# whose time does not parse (it keeps the source's time, now: a window of its own, still open).
EVENTS = [0, 3, 9, 10, 15, 100]


def _line(seconds: int) -> str:
    stamp = datetime.fromtimestamp(T0 + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.123Z")
    return f'{{"item": [{{"id": 1}}, {{"id": 2, "time": "{stamp}"}}]}}\n'


def test_a_reduce_windows_messages_by_the_event_time_the_builtin_read_from_them(spark, tmp_path):
    lines = tmp_path / "events.txt"
    lines.write_text("".join(_line(s) for s in EVENTS) + '{"item": [{}, {"time": "not a time"}]}\n')
    source = {"class": "tidal.examples.sources:LinesSource", "options": {"path": str(lines)}}
    extract = {"expression": "json(payload).item[1].time", "format": "2006-01-02T15:04:05Z07:00"}
    group = {"window": {"fixed": {"length": "10s"}}, "keyed": False}
    builtin = {"name": "eventTimeExtractor", "kwargs": extract}
    reduce = {"reduce": "tidal.examples.numaflow:ReduceCounter", "reduceArgs": [0], "groupBy": group}
    spec = parse_pipeline(
        {
            "name": "extract-event-time",
            "vertices": [
                {"name": "in", "source": {"user": source}},
                {"name": "in-transformer", "udf": {"builtin": builtin}},
                {"name": "count", "udf": reduce},
                {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
            ],
            "edges": [
                {"from": "in", "to": "in-transformer"},
                {"from": "in-transformer", "to": "count"},
                {"from": "count", "to": "out"},
            ],
        }
    )  # fmt: skip
    out = tmp_path / "run" / "out.jsonl"

    def windows() -> dict[int, int]:
        found = {}
        for record in delivered(out):
            start = int(record["id"].partition("@")[2].split("-")[0]) // 1000
            found[start] = int(record["payload"])
        return found

    def both_windows_closed() -> None:
        assert {k: v for k, v in windows().items() if k < T0 + 20} == {T0: 3, T0 + 10: 2}

    with PipelineRun(spec, tmp_path / "run", spark=spark, trigger_seconds=0.25) as run:
        eventually(both_windows_closed, 240, "the windows of the extracted times", run=run, poll=0.5)
    assert all(k < T0 + 20 or k >= T0 + 100 for k in windows()), "a window the extracted times do not have"
    assert Path(out).exists()
