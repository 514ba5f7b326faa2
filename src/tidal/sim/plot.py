"""PNG plots of simulations (matplotlib, headless).

* :func:`plot_run` — one policy on one trace: the load offered and delivered, replicas per
  vertex against the oracle, and pending per vertex.
* :func:`plot_comparison` — every policy on one trace: the load, then the bottleneck vertex's
  replicas per policy against the oracle.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tidal.sim.run import SimResult

__all__ = ["plot_comparison", "plot_run"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_run(result: SimResult, path: str | Path) -> Path:
    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = result.times
    fig, (ax_load, ax_rep, ax_pending) = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    ax_load.plot(t, result.trace.rates, label="offered", color="0.5")
    ax_load.plot(t, result.delivered, label="delivered", linewidth=0.8)
    ax_load.set_ylabel("messages/s")
    ax_load.legend(loc="upper right")
    for name, replicas in result.replicas.items():
        (line,) = ax_rep.step(t, replicas, where="post", label=name)
        ax_rep.step(t, result.oracle[name], where="post", linestyle=":", color=line.get_color())
    ax_rep.set_ylabel("replicas (dotted: oracle)")
    ax_rep.legend(loc="upper right")
    for name, pending in result.pending.items():
        ax_pending.plot(t, pending, label=name)
    ax_pending.set_ylabel("pending")
    ax_pending.set_xlabel("seconds")
    ax_pending.legend(loc="upper right")
    fig.suptitle(f"{result.policy} on {result.trace.name}: {result.trace.description}")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def plot_comparison(results: Sequence[SimResult], path: str | Path) -> Path:
    if not results:
        raise ValueError("nothing to plot")
    plt = _pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    first = results[0]
    bottleneck = first.bottleneck
    t = first.times
    fig, (ax_load, ax_rep) = plt.subplots(2, 1, figsize=(10, 6), sharex=True, height_ratios=(1, 2))
    ax_load.plot(t, first.trace.rates, color="0.4")
    ax_load.set_ylabel("offered msg/s")
    ax_rep.step(t, first.oracle[bottleneck], where="post", color="black", linestyle=":", label="oracle")
    for result in results:
        ax_rep.step(t, result.replicas[bottleneck], where="post", label=result.policy, linewidth=1)
    ax_rep.set_ylabel(f"replicas of {bottleneck!r}")
    ax_rep.set_xlabel("seconds")
    ax_rep.legend(loc="upper right", ncols=3)
    fig.suptitle(f"{first.trace.name}: {first.trace.description}")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
