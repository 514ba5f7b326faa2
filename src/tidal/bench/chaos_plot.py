"""The chaos bench's timeline: one PNG per run, what a person looks at first.

Four panels over one time axis (seconds from the run's first record): the scaled vertex's
replicas and the executors; its backlog; the delivery delay (p50 and p99 of each committed
batch) against the target; and every injected fault as a shaded band from its injection to its
recovery (a red line where it was injected, the band to where the pipeline recovered).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tidal.bench.chaos_checks import Fault
from tidal.scaling.latency import DelaySample

__all__ = ["plot_timeline"]


def plot_timeline(
    path: Path,
    title: str,
    series: Sequence[Mapping[str, Any]],
    vertex: str,
    executors: Sequence[Mapping[str, Any]],
    delays: Sequence[DelaySample],
    faults: Sequence[Fault],
    recoveries: Sequence[float | None],
    target: float,
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted((r for r in series if r.get("name") == vertex), key=lambda r: float(r["at"]))
    starts = [float(r["at"]) for r in rows] + [s.at for s in delays] + [f.at for f in faults]
    t0 = min(starts) if starts else 0.0
    fig, (ax_r, ax_b, ax_d) = plt.subplots(3, 1, figsize=(11, 7.5), sharex=True, constrained_layout=True)
    xs = [float(r["at"]) - t0 for r in rows]
    ax_r.step(
        xs, [int(r["replicas"]) for r in rows], where="post", color="#1f77b4", label=f"{vertex} replicas"
    )
    if executors:
        ex = sorted(executors, key=lambda e: float(e["at"]))
        ax_r.step([float(e["at"]) - t0 for e in ex], [int(e["executors"]) for e in ex], where="post",
                  color="#2ca02c", linestyle="--", label="executors")  # fmt: skip
    ax_r.set_ylabel("count")
    ax_r.legend(loc="upper left", frameon=False)
    ax_b.fill_between(xs, [float(r["pending"] or 0) for r in rows], step="post", color="#9467bd", alpha=0.5)
    ax_b.set_ylabel(f"{vertex} backlog")
    ds = sorted(delays, key=lambda s: s.at)
    ax_d.plot([s.at - t0 for s in ds], [s.p99 for s in ds], color="#d62728", lw=1, label="p99")
    ax_d.plot([s.at - t0 for s in ds], [s.p50 for s in ds], color="#ff7f0e", lw=1, label="p50")
    ax_d.axhline(target, color="grey", ls=":", lw=1, label=f"target {target:g} s")
    ax_d.set_ylabel("delivery delay (s)")
    ax_d.set_xlabel("seconds")
    ax_d.legend(loc="upper left", frameon=False)
    for fault, back in zip(faults, recoveries, strict=True):
        end = fault.until + (back if back is not None else 0.0)
        for ax in (ax_r, ax_b, ax_d):
            ax.axvspan(fault.at - t0, end - t0, color="#d62728", alpha=0.12, lw=0)
            ax.axvline(fault.at - t0, color="#d62728", lw=0.8)
        ax_r.annotate(fault.kind, (fault.at - t0, ax_r.get_ylim()[1]), fontsize=8, va="top", color="#d62728")
    for ax in (ax_r, ax_b, ax_d):
        ax.spines[["top", "right"]].set_visible(False)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
