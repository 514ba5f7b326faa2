"""Delivery delay in the run report: each sink's p50 and p99, source to sink, over time.

Read from the control record's batches (every committed sink batch keeps its delay sample,
:mod:`tidal.scaling.latency`), so the report shows every delivered message, not the live
view's last seconds.
"""

from __future__ import annotations

import math
from pathlib import Path

from tidal.isb.control import ControlStore
from tidal.scaling.latency import DelaySample, pooled

__all__ = ["WINDOW", "latency_line", "plot_latency", "read_delays", "windows"]

WINDOW = 5.0  # seconds per point of the plot


def read_delays(run_dir: Path) -> dict[str, list[DelaySample]]:
    """Every delivered batch's delays, per sink that delivered something."""
    db = run_dir / "pipeline.db"
    if not db.exists():
        return {}
    control = ControlStore(db)
    try:
        return {name: control.delays(name) for name in control.delivering()}
    finally:
        control.close()


def windows(samples: list[DelaySample], width: float = WINDOW) -> list[DelaySample]:
    """``samples`` pooled into consecutive windows of ``width`` seconds (stamped at their end)."""
    if not samples:
        return []
    out: list[DelaySample] = []
    start = samples[0].at
    current: list[DelaySample] = []
    for s in samples:
        while s.at >= start + width:
            if current:
                out.append(pooled(current, start + width))
                current = []
            start += width
        current.append(s)
    if current:
        out.append(pooled(current, start + width))
    return out


def latency_line(delays: dict[str, list[DelaySample]]) -> str:
    """One line per sink for the report's head: p50, p99 and max over every delivered message."""
    parts = []
    for name, samples in delays.items():
        whole = pooled(samples, samples[-1].at)
        parts.append(
            f"{name}: p50 {whole.p50:.2f} s, p99 {whole.p99:.2f} s, max {whole.max:.2f} s "
            f"over {whole.count:,} messages"
        )
    return "delivery delay, source to sink: " + "; ".join(parts) + "\n\n" if parts else ""


def _with_gaps(points: list[DelaySample], start: float) -> tuple[list[float], list[float], list[float]]:
    """Times, p50 and p99 of ``points``, with a break (NaN) where nothing was delivered for more
    than two windows: a line across an idle spell would show delays nobody had."""
    t: list[float] = []
    p50: list[float] = []
    p99: list[float] = []
    for w in points:
        if t and w.at - start - t[-1] > 2 * WINDOW:
            t.append(t[-1] + WINDOW)
            p50.append(math.nan)
            p99.append(math.nan)
        t.append(w.at - start)
        p50.append(w.p50)
        p99.append(w.p99)
    return t, p50, p99


def plot_latency(delays: dict[str, list[DelaySample]], start: float, path: Path) -> None:
    """p50 (solid) and p99 (dashed) per sink over time, in seconds (on a log scale when they
    span more than a decade)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    low, high = float("inf"), 0.0
    for i, (name, samples) in enumerate(delays.items()):
        points = windows(samples)
        t, p50, p99 = _with_gaps(points, start)
        color = colors[i % len(colors)]
        marker = "o" if len(points) < 20 else None  # a short run still shows its points
        ax.plot(t, p50, color=color, marker=marker, label=f"{name} p50")
        ax.plot(t, p99, color=color, marker=marker, ls="--", label=f"{name} p99")
        low, high = min(low, *(w.p50 for w in points)), max(high, *(w.p99 for w in points))
    if low > 0 and high / low > 20:  # a log scale only when delays span more than a decade or so
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0, top=high * 1.15 if high > 0 else 1)
    ax.set_ylabel("seconds, source to sink")
    ax.set_xlabel("seconds since start")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="upper right", fontsize="small")
    ax.set_title(f"delivery delay ({WINDOW:g} s windows)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
