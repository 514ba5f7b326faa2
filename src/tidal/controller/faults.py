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

__all__ = ["FAULTS_FILE", "FaultLog", "read_faults", "read_jsonl"]

FAULTS_FILE = "faults.jsonl"


class FaultLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def record(self, kind: str, who: str, reason: str, at: float | None = None, **extra: Any) -> None:
        """``kind``: what happened ("receiver lost", "buffer server silent"); ``who``: the vertex it
        happened to, or ``(buffers)``; ``reason``: its cause, in words with the numbers."""
        line = {"at": time.time() if at is None else at, "kind": kind, "who": who, "reason": reason, **extra}
        with self._lock, self.path.open("a+b") as f:
            # A line a kill cut short (no newline) would swallow this one: both unreadable. End it
            # first, so only the cut line is lost (readers skip it).
            cut = f.seek(0, 2) > 0 and f.seek(-1, 2) >= 0 and f.read(1) != b"\n"
            f.write((("\n" if cut else "") + json.dumps(line) + "\n").encode())


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
