"""The vertical recommendations as a person reads them (``tidal status``, the report).

One line per query (a chain's at its head): the memory and cores a replica needs, VPA's way
(:mod:`tidal.scaling.vertical`), with the bounds once 10 minutes of history back them (before,
the confidence multiplier keeps them wide open, as upstream does for a new pod; ``status.json``
has the raw figures), and how much history there is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["YOUNG", "vertical_lines"]

# Below this much history the confidence multiplier leaves VPA's upper bound at hundreds of times
# the target (upstream's behaviour for a new pod): the lines show the target alone until then.
YOUNG = 600.0


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
        history = f"from {rec['samples']:,} micro-batches over {rec['history_seconds'] / 60:,.1f} min"
        if rec["history_seconds"] < YOUNG:  # VPA's bounds are still wide open: not worth a number
            lines.append(
                f"{v['name']}: memory {_mb(mem['target'])} per replica, cores {cpu['target']:.2f}; {history} "
                f"(bounds after {YOUNG / 60:.0f} min)"
            )
            continue
        lines.append(
            f"{v['name']}: memory {_mb(mem['target'])} per replica (lower {_mb(mem['lower'])}, upper "
            f"{_mb(mem['upper'])}), cores {cpu['target']:.2f} ({cpu['lower']:.2f}–{cpu['upper']:.2f}); "
            + history
        )
    return lines
