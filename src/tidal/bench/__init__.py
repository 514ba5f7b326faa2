"""Benchmarks, run with ``tidal bench NAME`` (or ``make bench`` for all of them).

Each benchmark measures ours side by side with a baseline in the same run where one exists,
reports medians, prints a Markdown table and writes JSON under ``runs/bench/``. They are not
tests: the machines are shared and noisy, so numbers go into ``docs/``, not into assertions.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path("runs") / "bench"
# A busy machine can take minutes where a quiet one takes seconds: a benchmark's window starts
# once its job delivered, and waits for the event it needs, never for a fixed slice of wall time.
DEADLINE_S = 600.0


def rig_refusal(name: str) -> str | None:
    """Why ``tidal bench NAME`` cannot start its hosts here (they are network namespaces: root on
    Linux), or ``None``."""
    from tidal.rig import unavailable

    reason = unavailable()
    return None if reason is None else f"tidal bench {name} needs network namespaces: {reason}"


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``condition`` until it holds; after ``deadline_s`` raise ``TimeoutError`` saying that
    ``what`` (e.g. "the plain job finished no batch") is what never changed."""
    give_up = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > give_up:
            raise TimeoutError(f"benchmark: {what} within {deadline_s:g} s")
        time.sleep(0.2)


def stop_driver(proc: subprocess.Popen[Any], timeout: float = 180.0) -> None:
    """Stop a ``tidal run`` a benchmark started (its own session): SIGTERM, so it stops between
    batches and writes its report; SIGKILL to its whole group if it has not within ``timeout``."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def delivered_ids(path: Path) -> list[str]:
    """The ids a ``file`` sink committed, in order (with repeats, if any: the benchmarks count them)."""
    from tidal.spark.sinks.files import read_file_sink

    return [str(r["id"]) for r in read_file_sink(path)]


def write_result(name: str, payload: object, out: Path = RESULTS) -> Path:
    """Write ``payload`` as ``<out>/<name>.json`` and return the path."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def rate_after_first(ends: list[tuple[float, int]]) -> float:
    """Rows/s after the first non-empty micro-batch: ``ends`` = (end time, rows) of each one
    (the rate once running, without the query's start-up)."""
    ends = sorted(ends)
    rows = sum(r for _, r in ends[1:])
    return rows / (ends[-1][0] - ends[0][0]) if len(ends) > 1 and ends[-1][0] > ends[0][0] else float("nan")


def query_rate(query: Any, records: int) -> float:
    """A plain Structured Streaming query's :func:`rate_after_first` once it has read
    ``records`` rows, from its progress reports."""
    from datetime import datetime

    while sum(p["numInputRows"] for p in query.recentProgress) < records:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        time.sleep(0.2)
    ends = []
    for p in query.recentProgress:
        if p["numInputRows"]:
            started = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
            ends.append((started + p["batchDuration"] / 1000, p["numInputRows"]))
    return rate_after_first(ends)


def vertex_rate(control: Any, vertex: str, query: Any, records: int) -> float:
    """A Tidal vertex query's :func:`rate_after_first` once it has processed ``records``
    messages, from its batch records (the query's own progress counts tasks, not messages)."""
    while control.processed(vertex) < records:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        time.sleep(0.2)
    return rate_after_first([(b.at, b.rows) for b in control.batches(vertex) if b.rows])
