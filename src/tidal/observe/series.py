"""The run's time series: one JSON line per vertex per sample, in ``series.jsonl``.

The report plots it; ``tidal status`` shows its last line; it survives a crash (every line is
flushed), so a report can be written for a run that was killed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

__all__ = ["SeriesLog", "read_series"]


class SeriesLog:
    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / "series.jsonl"

    def record(self, statuses: Iterable[Any], at: float | None = None) -> None:
        now = time.time() if at is None else at
        with self.path.open("a") as f:
            for status in statuses:
                f.write(json.dumps({"at": now, **asdict(status)}) + "\n")


def read_series(run_dir: str | Path) -> Iterator[dict[str, Any]]:
    path = Path(run_dir) / "series.jsonl"
    if not path.exists():
        return
    with path.open() as f:
        for line in f:
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError:  # a line cut short by a kill
                    continue
