"""The vertical recommendations as a person reads them (``tidal status``, the report).

One line per query (a chain's at its head): the memory and cores a replica needs, VPA's way
(:mod:`tidal.scaling.vertical`), with the bounds and how much history backs them, and what to
start the next run with on a cluster (executors are sized when they start: docs/api.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["vertical_lines"]


def _mb(value: float) -> str:
    return f"{value / 2**20:,.0f} MiB"


def vertical_lines(vertices: Iterable[Mapping[str, Any]]) -> list[str]:
    """``vertices``: status records (``name``, ``vertical``); a line for each that has one."""
    lines = []
    for v in vertices:
        rec = v.get("vertical")
        if not rec:
            continue
        mem, cpu = rec["memory_bytes"], rec["cpu_cores"]
        lines.append(
            f"{v['name']}: memory {_mb(mem['target'])} per replica (lower {_mb(mem['lower'])}, upper "
            f"{_mb(mem['upper'])}), cores {cpu['target']:.2f} ({cpu['lower']:.2f}–{cpu['upper']:.2f}); "
            f"from {rec['samples']:,} micro-batches over {rec['history_seconds'] / 60:,.1f} min"
        )
    return lines
