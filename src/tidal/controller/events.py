"""The run's event log: one JSON line per decision worth keeping, readable while the run goes.

Every change is written. A hold is written when its rule or its replica count differs from the
vertex's previous entry, so a steady vertex adds one line, not one a second, and
``tidal events`` can still answer "why did it (not) scale?" at any moment.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from tidal.controller.faults import append_jsonl, read_jsonl
from tidal.scaling import Decision

__all__ = ["EventLog"]


class EventLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._last: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def record(self, decision: Decision, *, news: bool = False) -> bool:
        """Write ``decision`` if it is news for its vertex (``news``: it is, whatever came
        before: a side input's new value); return whether it was written."""
        key = (str(decision.rule), decision.desired)
        if not news and not decision.changed and self._last.get(decision.vertex) == key:
            return False
        self._last[decision.vertex] = key
        with self._lock:
            append_jsonl(self.path, decision.to_dict())
        return True

    def read(self) -> Iterator[Decision]:
        """Every decision written, without a line a kill cut short."""
        for row in read_jsonl(self.path):
            yield Decision.from_dict(row)
