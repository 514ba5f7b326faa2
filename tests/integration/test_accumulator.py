"""Numaflow's accumulator window on Spark: numaflow-python's stream sorter (its example.py, as it
stands) sorts out-of-order messages per key; each message reaches the sink once, in event-time
order within its key; a key flushes progressively as the watermark moves and completely when it
times out; a restart resumes the open windows from Spark's state store."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import Pipeline
from tidal.testing import delivered

from .waits import eventually

EXAMPLE = Path(__file__).parents[1] / "data" / "numaflow" / "python" / "accumulator" / "streamsorter"
T0 = 1_700_000_000
DISORDER = [2, 1, 3, 0, 4]  # seconds each of five messages in a row is moved: less than the lateness

# Stage 1: 20 messages, values 1..20 (odd and even keys, by even_odd), out of order within 4 s.
STAGE_1 = [(T0 + i + DISORDER[i % 5] + i / 1000, i + 1) for i in range(20)]
# Stage 2: only the even key, far ahead: the watermark (latest - 5 s lateness) passes the odd
# key's latest event time + 10 s, so the odd key times out and flushes.
STAGE_2 = [(T0 + 40, 1000), (T0 + 42, 1002), (T0 + 44, 1004)]
# Stage 3: one odd message further ahead: the even key times out; the odd key's new window stays open.
STAGE_3 = [(T0 + 80, 2001)]
TIMES = {value: t for t, value in STAGE_1 + STAGE_2 + STAGE_3}


@pytest.fixture(scope="module")
def sorter_module(spark, tmp_path_factory) -> str:
    """example.py as the module ``streamsorter_example``, on the driver's path and shipped to
    Spark's Python workers (addPyFile), as a user ships the file next to the pipeline."""
    folder = tmp_path_factory.mktemp("handlers")
    shutil.copy(EXAMPLE / "example.py", folder / "streamsorter_example.py")
    import sys

    sys.path.insert(0, str(folder))
    spark.sparkContext.addPyFile(str(folder / "streamsorter_example.py"))
    return "streamsorter_example:StreamSorter"


def _write(path: Path, events: list[tuple[float, int]]) -> None:
    with path.open("a") as f:
        f.writelines(f"{t} {value}\n" for t, value in events)


def _spec(lines: Path, handler: str) -> object:
    return (
        Pipeline("sorter", chaining=False, limits={"readBatchSize": 10})  # batches: the watermark moves
        .source(
            "in", user="tidal.examples.sources:LinesSource", options={"path": str(lines), "timestamps": True}
        )
        .pynumaflow("key", "tidal.examples.numaflow:even_odd")  # keys even / odd
        .reduce(
            "sort",
            handler,
            window={"accumulator": {"timeout": "10s"}},
            keyed=True,
            allowed_lateness="5s",
            partitions=2,
        )
        .sink("out", "file", path="out.jsonl")
        .build()
    )


def _by_key(out: Path) -> dict[str, list[int]]:
    """The delivered values per key, in delivery order; each id once."""
    records = delivered(out)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)), "a message was delivered twice"
    found: dict[str, list[int]] = {"odd": [], "even": []}
    for record in records:
        value = int(record["payload"])
        found["even" if value % 2 == 0 else "odd"].append(value)
    return found


def _sorted(values: list[int]) -> list[int]:
    return sorted(values, key=lambda v: TIMES[v])


ODD = _sorted([v for _, v in STAGE_1 if v % 2])
EVEN = _sorted([v for _, v in STAGE_1 + STAGE_2 if v % 2 == 0])


def test_the_stream_sorter_sorts_each_key_flushes_as_the_watermark_moves_and_at_timeout_through_a_restart(
    spark, sorter_module, tmp_path
):
    lines = tmp_path / "events.txt"
    out = tmp_path / "run" / "out.jsonl"
    spec = _spec(lines, sorter_module)
    _write(lines, STAGE_1 + STAGE_2)
    with PipelineRun(spec, tmp_path / "run", spark=spark, trigger_seconds=0.25) as run:

        def odd_timed_out_and_even_flushed_in_part() -> dict[str, list[int]]:
            found = _by_key(out)
            assert found["odd"] == ODD  # all of it, once, in event-time order: the timeout flushed it
            assert found["even"] and found["even"] == EVEN[: len(found["even"])]  # a sorted prefix
            return found

        found = eventually(odd_timed_out_and_even_flushed_in_part, 120, "the odd key's flush", run=run)
    # The even key is still open: what is past its watermark waits in Spark's state store.
    assert len(found["even"]) < len(EVEN)
    assert _by_key(out)["even"] == found["even"]

    _write(lines, STAGE_3)  # after a restart: the even key times out from the state it left
    with PipelineRun(spec, tmp_path / "run", spark=spark, trigger_seconds=0.25) as run:

        def every_message_once_in_order() -> None:
            assert _by_key(out) == {"odd": ODD, "even": EVEN}

        eventually(every_message_once_in_order, 120, "the even key's flush", run=run)
    assert _by_key(out) == {"odd": ODD, "even": EVEN}  # 2001 opened a window that is still open
    ids = [r["id"] for r in delivered(out)]
    assert all(i.startswith(("sort:odd@", "sort:even@")) and "#" in i for i in ids)


def test_a_sigkilled_accumulator_resumes_from_its_state_and_delivers_every_message_once_in_order(
    tmp_path, monkeypatch
):
    import json
    import os
    import signal

    from .test_cli import tidal
    from .waits import wait_for

    folder = tmp_path / "handlers"
    folder.mkdir()
    shutil.copy(EXAMPLE / "example.py", folder / "streamsorter_example.py")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(folder))  # the builder checks the handler here too
    # 400 messages a second apart, out of order within 4 s; then an odd one far ahead (the even
    # key times out) and, once the even key has flushed, an even one further still (the odd key
    # times out; even's new window stays open). Written together, the two could share a batch,
    # and the even key, given a message, would not time out.
    events = [(T0 + i + DISORDER[i % 5] + i / 1000, i + 1) for i in range(400)]
    closers = [(T0 + 1000, 4001), (T0 + 2000, 4002)]
    times = {value: t for t, value in [*events, *closers]}
    _write(tmp_path / "events.txt", [*events, closers[0]])
    spec = _spec(tmp_path / "events.txt", "streamsorter_example:StreamSorter")
    (tmp_path / "sorter.json").write_text(json.dumps(spec.model_dump(by_alias=True, exclude_none=True)))
    run_dir = str(tmp_path / "run")
    args = ("run", str(tmp_path / "sorter.json"), "--run-dir", run_dir, "--no-metrics", "--no-live")
    out = tmp_path / "run" / "out.jsonl"
    expected = {
        "odd": sorted([v for _, v in events if v % 2] + [4001], key=times.__getitem__),
        "even": sorted([v for _, v in events if v % 2 == 0], key=times.__getitem__),
    }

    first = tidal(*args, start_new_session=True)
    try:
        wait_for(lambda: len(delivered(out)) >= 40, 240, "the first sorted messages", first)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
    before = _by_key(out)
    assert sum(map(len, before.values())) < 401, "finished before the kill"
    second = tidal(*args, start_new_session=True)

    def even_timed_out() -> None:
        found = _by_key(out)  # each id once (checked as it is read)
        assert found["even"] == expected["even"]
        assert found["odd"] == expected["odd"][: len(found["odd"])]

    def every_message_once_in_order() -> None:
        assert _by_key(out) == expected  # each id once, each key sorted

    try:
        eventually(even_timed_out, 300, "the even key's flush", proc=second, poll=1)
        _write(tmp_path / "events.txt", [closers[1]])
        eventually(every_message_once_in_order, 300, "every message", proc=second, poll=1)
        time.sleep(2)  # a message written twice would show up by now
    finally:
        second.send_signal(signal.SIGTERM)
        second.communicate(timeout=120)
    every_message_once_in_order()  # and nothing doubled since
