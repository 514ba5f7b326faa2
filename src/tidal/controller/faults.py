"""The run's fault log: what happened *to* the pipeline, not what it decided — a receiver lost
with its host, a buffer server gone silent and back. One JSON line each in ``RUN_DIR/faults.jsonl``;
``tidal events`` shows them among the decisions, with their causes. (An executor lost is in
``executors.jsonl`` with the allocator's other records, and shown the same way.)
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["FAULTS_FILE", "FaultLog", "append_jsonl", "read_faults", "read_jsonl"]

FAULTS_FILE = "faults.jsonl"


class FaultLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def record(self, kind: str, who: str, reason: str, at: float | None = None, **extra: Any) -> None:
        """``kind``: what happened ("receiver lost", "buffer server silent"); ``who``: the vertex it
        happened to, or ``(buffers)``; ``reason``: its cause, in words with the numbers."""
        line = {"at": time.time() if at is None else at, "kind": kind, "who": who, "reason": reason, **extra}
        with self._lock:
            append_jsonl(self.path, line)


def append_jsonl(path: str | Path, row: dict[str, Any]) -> None:
    """Append ``row`` as one JSON line. A line a kill cut short (no newline at the file's end) is
    closed first, so it costs only itself: appended to, it would take the new row down with it."""
    with Path(path).open("a+b") as f:
        size = f.seek(0, 2)
        torn = False
        if size:
            f.seek(size - 1)
            torn = f.read(1) != b"\n"
        f.write((b"\n" if torn else b"") + json.dumps(row, default=str).encode() + b"\n")


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """A JSON-lines record of the run (faults, events), without a last line a kill cut short."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a line cut short by a kill
            continue
    return out


def read_faults(run_dir: str | Path) -> list[dict[str, Any]]:
    return read_jsonl(Path(run_dir) / FAULTS_FILE)
