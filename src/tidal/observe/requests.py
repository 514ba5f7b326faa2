"""The request path of an HTTP source in the run report: ``requests.jsonl`` (one line a second,
written by :class:`~tidal.request.path.RequestPath`) as a plot and a summary line."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

__all__ = ["plot_requests", "read_requests", "summary_line"]


def read_requests(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "requests.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.endswith("}"):
            rows.append(json.loads(line))
    return rows


def summary_line(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    out_of_path = sum(1 for r in rows if not r["in_path"])
    return (
        f"request path: peak {max(r['rps'] for r in rows):,.0f} req/s, peak concurrency "
        f"{max(r['concurrency'] for r in rows):.1f}, {rows[-1]['refused']:,} refused (503), longest wait "
        f"for a receiver {max(r['longest_wait'] for r in rows):.2f} s, peak {max(r['ready'] for r in rows)} "
        f"receivers; activator out of the path {out_of_path} of {len(rows)} s\n\n"
    )


def plot_requests(rows: list[dict[str, Any]], start: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["at"] - start for r in rows]
    fig, (ax_load, ax_wait, ax_receivers) = plt.subplots(3, 1, figsize=(9, 7), sharex=True)
    ax_load.plot(t, [r["rps"] for r in rows], color="tab:blue", label="requests/s")
    ax_conc = ax_load.twinx()
    ax_conc.plot(t, [r["concurrency"] for r in rows], color="tab:purple", lw=1, label="concurrency")
    ax_load.set_ylabel("requests/s")
    ax_conc.set_ylabel("concurrency")
    ax_load.legend(loc="upper left", fontsize="small")
    ax_conc.legend(loc="upper right", fontsize="small")
    ax_wait.plot(t, [r["held"] for r in rows], color="tab:orange", label="held by the activator")
    refused = [b["refused"] - a["refused"] for a, b in itertools.pairwise(rows)]
    ax_wait.bar(t[1:], refused, width=0.9, color="tab:red", alpha=0.6, label="refused (503) per second")
    ax_wait.set_ylabel("requests")
    ax_wait.legend(loc="upper right", fontsize="small")
    ax_receivers.step(t, [r["ready"] for r in rows], where="post", color="black", label="receivers ready")
    for x, r in zip(t, rows, strict=True):
        if r["in_path"]:
            ax_receivers.axvspan(x - 0.5, x + 0.5, color="tab:orange", alpha=0.12, lw=0)
    ax_receivers.plot([], [], color="tab:orange", alpha=0.3, lw=6, label="activator in the path")
    ax_receivers.set_ylabel("receivers")
    ax_receivers.set_xlabel("seconds since start")
    ax_receivers.set_ylim(bottom=0)
    ax_receivers.legend(loc="upper right", fontsize="small")
    fig.suptitle("the request path: load, what waits, and who serves it")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
