"""Benchmarks, run with ``tidal bench NAME`` (or ``make bench`` for all of them).

Each benchmark measures ours side by side with a baseline in the same run where one exists,
reports medians, prints a Markdown table and writes JSON under ``runs/bench/``. They are not
tests: the machines are shared and noisy, so numbers go into ``docs/``, not into assertions.
"""

from __future__ import annotations

from pathlib import Path

RESULTS = Path("runs") / "bench"


def write_result(name: str, payload: object, out: Path = RESULTS) -> Path:
    """Write ``payload`` as ``<out>/<name>.json`` and return the path."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
