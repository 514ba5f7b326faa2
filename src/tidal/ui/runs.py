"""A run directory as the dashboard reads it: JSON-able values, errors as values, tails by offset.

Everything is read from the files a run writes (``pipeline.yaml``, ``status.json``,
``series.jsonl``, ``events.jsonl``, and the faults: ``faults.jsonl`` and the executors lost in
``executors.jsonl``), so a live run and a finished one look the same, and the dashboard needs
nothing from the process that runs the pipeline. A run that is gone or a file
that is damaged becomes ``{"error": "..."}`` for the page to show, never an exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidal.controller.faults import FAULTS_FILE

__all__ = ["RunReader", "Tail", "executor_faults"]


@dataclass
class Tail:
    """New complete JSON lines of a file since the last call (a half-written line waits)."""

    path: Path
    offset: int = 0
    bad: int = 0  # lines that were not JSON (a damaged file): counted, not fatal

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        rows = []
        for line in data[: end + 1].splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                self.bad += 1
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows


def executor_faults(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The executors lost among ``executors.jsonl``'s records, as fault rows (``at``, ``kind``,
    ``who``, ``reason``): a lost executor is a fault of the run as much as a receiver lost, but
    the allocator keeps it with its own records (decisions, counts, start-ups), which the page
    does not draw."""
    return [
        {
            "at": r["at"],
            "kind": "executor lost",
            "who": "(executors)",
            "reason": f"executor {r.get('id', '?')} on {r.get('host', '?')}: {r.get('reason', '')}",
        }
        for r in rows
        if r.get("kind") == "lost" and "at" in r
    ]


@dataclass
class RunReader:
    """One run directory, read for the dashboard."""

    path: Path
    series: Tail = field(init=False)
    events: Tail = field(init=False)
    faults: Tail = field(init=False)
    executors: Tail = field(init=False)
    _status_mtime: float = -1.0

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self._tails()

    def _tails(self) -> None:
        self.series = Tail(self.path / "series.jsonl")
        self.events = Tail(self.path / "events.jsonl")
        self.faults = Tail(self.path / FAULTS_FILE)
        self.executors = Tail(self.path / "executors.jsonl")

    def _new_faults(self) -> list[dict[str, Any]]:
        """New faults of both files, in time order: what the page draws as bands on the charts."""
        rows = self.faults.read() + executor_faults(self.executors.read())
        return sorted((r for r in rows if isinstance(r.get("at"), int | float)), key=lambda r: r["at"])

    @property
    def name(self) -> str:
        return self.path.name

    def graph(self) -> dict[str, Any]:
        """Vertices (name, kind), edges (chained or not, and why), chains and buffer limits, from the
        run's ``pipeline.yaml``."""
        if not self.path.is_dir():
            return {"error": f"{self.path} is not a run directory (it does not exist)"}
        spec_file = self.path / "pipeline.yaml"
        if not spec_file.exists():
            return {"error": f"{spec_file} is missing: is {self.path} a Tidal run directory?"}
        from tidal import errors
        from tidal.spec import load_pipeline

        try:
            spec = load_pipeline(spec_file)
        except errors.SpecError as exc:
            return {"error": f"{spec_file} cannot be read: {exc}"}
        from tidal.spec.chains import plan_chains

        limits = spec.limits
        plan = plan_chains(spec)
        return {
            "pipeline": spec.name,
            "vertices": [{"name": v.name, "kind": v.kind} for v in spec.vertices],
            # Each edge with whether it is chained (no buffer: one query) and why.
            "edges": [
                {"from": e.from_, "to": e.to, "chained": e.chained, "reason": e.reason} for e in plan.edges
            ],
            "chains": [list(c.members) for c in plan.chains if c.followers],
            "limits": {
                "bufferMaxLength": limits.buffer_max_length,
                "bufferUsageLimit": limits.buffer_usage_limit,
                "backPressureThreshold": 0.9,
            },
        }

    def status(self, *, changed_only: bool = False) -> dict[str, Any] | None:
        """``status.json`` (``None`` when ``changed_only`` and it did not change)."""
        path = self.path / "status.json"
        try:
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            return {"error": f"no status yet at {path}"} if not changed_only else None
        if changed_only and mtime == self._status_mtime:
            return None
        self._status_mtime = mtime
        try:
            record = json.loads(path.read_text())
        except ValueError:
            return None if changed_only else {"error": f"{path} is damaged (not JSON)"}  # mid-rewrite
        return record if isinstance(record, dict) else {"error": f"{path} is not a status record"}

    def snapshot(self) -> dict[str, Any]:
        """Everything so far: the graph, the status, every series row, event and fault."""
        self._tails()
        self._status_mtime = -1.0
        return {
            "run": self.name,
            "path": str(self.path),
            "graph": self.graph(),
            "status": self.status(),
            "series": self.series.read(),
            "events": self.events.read(),
            "faults": self._new_faults(),
        }

    def updates(self) -> dict[str, Any] | None:
        """What changed since the last call (``None``: nothing)."""
        status = self.status(changed_only=True)
        series = self.series.read()
        events = self.events.read()
        faults = self._new_faults()
        if status is None and not series and not events and not faults:
            return None
        return {"run": self.name, "status": status, "series": series, "events": events, "faults": faults}
