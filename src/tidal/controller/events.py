"""The run's event log: one JSON line per decision worth keeping, readable while the run goes.

Every change is written. A hold is written when its rule or its replica count differs from the
vertex's previous entry, so a steady vertex adds one line, not one a second, and
``tidal events`` can still answer "why did it (not) scale?" at any moment.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

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
        line = json.dumps(decision.to_dict(), default=str)
        with self._lock, self.path.open("a") as f:
            f.write(line + "\n")
        return True

    def read(self) -> Iterator[Decision]:
        if not self.path.exists():
            return
        with self.path.open() as f:
            for line in f:
                if line.strip():
                    yield Decision.from_dict(json.loads(line))
