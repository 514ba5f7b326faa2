"""The report written at the end of every run: a PNG per vertex and a summary.

Per vertex (``report/<vertex>.png``), over time since the start: the processing rate — the
lookback average the policy decides on, and the throughput between two samples — the pending
messages now, and the replicas (current and desired) with every scaling change marked (green
up, red down). ``report/summary.md`` and ``summary.json`` hold, per vertex, the messages
processed and sent to the dead letter (from the final status, written after every query
stopped: what the sinks committed), peak replicas, replica-seconds (the area under the
replicas curve: what the run cost), the time to drain after each burst (from pending leaving 0
to pending back at 0) and how often it was reported stuck.

On a cluster manager (``executors.jsonl`` exists) the report adds what the run cost in
machines: executor-seconds and core-seconds (the areas under the registered executors' and
their cores' curves), the executors' start-ups (request → registered → first task done) and
``report/executors.png``, the executor count over time with Σ replicas beside it.

Every sink's delivery delay (source to sink: p50 and p99 over time, ``report/latency.png``, and
a line in the summary over all its messages: :mod:`tidal.observe.latency`).
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tidal.controller.events import EventLog
from tidal.observe.latency import latency_line, plot_latency, read_delays
from tidal.observe.requests import plot_requests, read_requests, summary_line
from tidal.observe.series import read_series
from tidal.scaling import Decision, Rule

__all__ = [
    "ExecutorSummary",
    "VertexSummary",
    "drains",
    "final_statuses",
    "summarize",
    "summarize_executors",
    "write_report",
]


@dataclass
class VertexSummary:
    vertex: str
    kind: str
    processed: int
    peak_replicas: int
    replica_seconds: float
    drains: list[float] = field(default_factory=list)  # seconds, one per burst that drained
    scale_ups: int = 0
    scale_downs: int = 0
    dead: int = 0  # messages sent to the dead letter
    stuck: int = 0  # times the vertex was reported stuck (pending, nothing processed)
    # A chain's follower: the head whose query (and replicas) it runs in. Its replica-seconds are
    # counted once, at the head, so the vertices' sum is what the run used.
    runs_in: str | None = None


def _by_vertex(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        out[row["name"]].append(row)
    return out


def drains(rows: list[dict[str, Any]], gap: float = 5.0, shortest: float = 2.0) -> list[float]:
    """Durations of the backlog spells that drained: from pending leaving 0 to pending back at 0.

    Micro-batches make pending flicker to 0 between batches, so zeros shorter than ``gap``
    seconds do not end a spell, and spells shorter than ``shortest`` are not bursts. A spell
    still open at the end of the run is left out.
    """
    spells: list[list[float]] = []
    began = None
    for row in rows:
        busy = (row.get("pending") or 0) > 0
        if busy and began is None:
            began = row["at"]
            if spells and began - spells[-1][1] < gap:
                began = spells.pop()[0]  # a flicker: the previous spell goes on
        elif not busy and began is not None:
            spells.append([began, row["at"]])
            began = None
    return [round(end - start, 1) for start, end in spells if end - start >= shortest]


def final_statuses(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The final status per vertex when the run stopped cleanly: written after every query
    stopped, so its counts are what the batches committed (what the sinks hold)."""
    try:
        record = json.loads((run_dir / "status.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    if record.get("state") != "stopped":
        return {}
    return {v["name"]: v for v in record.get("vertices", [])}


def summarize(run_dir: str | Path) -> list[VertexSummary]:
    """Per vertex; processed and dead-letter counts from the final status (what was committed)
    when the run stopped cleanly, else from the last sample."""
    run_dir = Path(run_dir)
    series = _by_vertex(list(read_series(run_dir)))
    events = _events(run_dir)
    final = final_statuses(run_dir)
    out = []
    for name, rows in series.items():
        chain = rows[-1].get("chain")
        head = chain.split(">")[0] if chain else name
        replica_seconds = (
            sum(a["replicas"] * (b["at"] - a["at"]) for a, b in itertools.pairwise(rows))
            if head == name
            else 0.0
        )
        changes = [e for e in events if e.vertex == name and e.changed]
        last = final.get(name, rows[-1])
        out.append(
            VertexSummary(
                vertex=name,
                kind=rows[-1]["kind"],
                processed=int(last["processed"]),
                dead=int(last.get("dead", 0) or 0),
                stuck=sum(1 for e in events if e.vertex == name and e.rule == Rule.STUCK),
                peak_replicas=max(r["replicas"] for r in rows),
                replica_seconds=round(replica_seconds, 1),
                drains=drains(rows),
                scale_ups=sum(1 for e in changes if e.desired > e.current),
                scale_downs=sum(1 for e in changes if e.desired < e.current),
                runs_in=None if head == name else head,
            )
        )
    return out


@dataclass
class ExecutorSummary:
    peak: int
    executor_seconds: float
    core_seconds: float
    startups: int
    registered_median: float | None  # seconds from the request to the executor registered
    first_task_median: float | None  # seconds from the request to its first task done
    first_task_max: float | None


def _or_dash(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def _median(values: list[float]) -> float | None:
    import statistics

    return round(statistics.median(values), 1) if values else None


def _area(points: list[tuple[float, float]], end: float) -> float:
    """The area under a step curve given as (time, value) change points, up to ``end``."""
    total = 0.0
    for (t0, v), (t1, _) in itertools.pairwise([*points, (end, 0.0)]):
        total += v * max(0.0, t1 - t0)
    return total


def summarize_executors(run_dir: str | Path) -> ExecutorSummary | None:
    """Executor cost and start-ups of a run on a cluster manager (None in local mode)."""
    from tidal.spark.cluster.executors import read_executor_log

    log = read_executor_log(run_dir)
    counts = log["count"]
    if not counts:
        return None
    end = max(c["at"] for c in counts)
    startups = log["startup"]
    return ExecutorSummary(
        peak=max(c["executors"] for c in counts),
        executor_seconds=round(_area([(c["at"], c["executors"]) for c in counts], end), 1),
        core_seconds=round(_area([(c["at"], c["cores"]) for c in counts], end), 1),
        startups=len(startups),
        registered_median=_median([s["registered_after"] for s in startups]),
        first_task_median=_median([s["first_task_after"] for s in startups]),
        first_task_max=max((s["first_task_after"] for s in startups), default=None),
    )


def _plot_executors(run_dir: Path, rows: list[dict[str, Any]], start: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tidal.spark.cluster.executors import read_executor_log

    log = read_executor_log(run_dir)
    fig, ax = plt.subplots(figsize=(9, 3.2))
    counts = log["count"]
    ax.step([c["at"] - start for c in counts], [c["executors"] for c in counts], where="post",
            color="black", lw=2, label="executors registered")  # fmt: skip
    by_time: dict[float, int] = defaultdict(int)
    for r in rows:
        by_time[r["at"]] += r["replicas"]
    if by_time:
        times = sorted(by_time)
        cores = max(1, int(log["decision"][0]["inputs"]["executor_cores"])) if log["decision"] else 1
        ax.step([t - start for t in times], [by_time[t] / cores for t in times], where="post",
                color="tab:gray", ls="--", label=f"Σ replicas / {cores} cores per executor")  # fmt: skip
    for s in log["startup"]:
        span = [s["requested_at"] - start, s["first_task_at"] - start]
        ax.plot(span, [0.15, 0.15], color="tab:orange", lw=4, alpha=0.5, solid_capstyle="butt")
    ax.plot([], [], color="tab:orange", lw=4, alpha=0.5, label="an executor starting (request → first task)")
    ax.set_ylabel("executors")
    ax.set_xlabel("seconds since start")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize="small")
    ax.set_title("executors follow the replicas")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _events(run_dir: Path) -> list[Decision]:
    return list(EventLog(run_dir / "events.jsonl").read())


def _plot(name: str, rows: list[dict[str, Any]], events: list[Decision], start: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["at"] - start for r in rows]
    fig, (ax_rate, ax_pending, ax_replicas) = plt.subplots(3, 1, figsize=(9, 7), sharex=True)
    ax_rate.plot(
        t, [r["rate"] or 0 for r in rows], color="tab:blue", label="lookback average (what the policy sees)"
    )
    throughput = [
        (b["at"] - start, max(0.0, (b["processed"] - a["processed"]) / (b["at"] - a["at"])))
        for a, b in itertools.pairwise(rows)
        if b["at"] > a["at"]
    ]
    if throughput:
        ax_rate.plot(*zip(*throughput, strict=True), color="tab:cyan", lw=0.8, alpha=0.8, label="throughput")
    ax_rate.set_ylabel("messages/s")
    ax_rate.legend(loc="upper right", fontsize="small")
    ax_pending.plot(t, [r["pending"] or 0 for r in rows], color="tab:orange")
    ax_pending.set_ylabel("pending now")
    ax_replicas.step(t, [r["replicas"] for r in rows], where="post", label="replicas", color="black")
    desired = [(x, r["desired"]) for x, r in zip(t, rows, strict=True) if r["desired"] is not None]
    if desired:
        ax_replicas.step(
            *zip(*desired, strict=True), where="post", label="desired", color="tab:gray", ls="--"
        )
    for e in events:
        if e.vertex == name and e.changed:
            color = "tab:green" if e.desired > e.current else "tab:red"
            for ax in (ax_rate, ax_pending, ax_replicas):
                ax.axvline(e.at - start, color=color, alpha=0.35, lw=1)
    ax_replicas.set_ylabel("replicas")
    ax_replicas.set_xlabel("seconds since start")
    ax_replicas.legend(loc="upper right")
    fig.suptitle(f"vertex {name}: scaling changes marked (green up, red down)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_report(run_dir: str | Path) -> Path:
    """Write ``report/`` under ``run_dir`` and return its summary's path."""
    run_dir = Path(run_dir)
    out = run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    rows = list(read_series(run_dir))
    events = _events(run_dir)
    start = min((r["at"] for r in rows), default=0.0)
    for name, vertex_rows in _by_vertex(rows).items():
        _plot(name, vertex_rows, events, start, out / f"{name}.png")
    summary = summarize(run_dir)
    (out / "summary.json").write_text(json.dumps([asdict(s) for s in summary], indent=1))
    lines = [
        "| vertex | kind | processed | dead letters | peak replicas | replica-seconds | scale-ups "
        "| scale-downs | drain times (s) | stuck |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        drains = ", ".join(f"{d:g}" for d in s.drains) or "—"
        lines.append(
            f"| {s.vertex} | {s.kind} | {s.processed} | {s.dead} | {s.peak_replicas} | "
            f"{s.replica_seconds:g} | {s.scale_ups} | {s.scale_downs} | {drains} | {s.stuck or '—'} |"
            if s.runs_in is None
            else f"| {s.vertex} | {s.kind} | {s.processed} | {s.dead} | in {s.runs_in}'s query | "
            f"counted at {s.runs_in} | — | — | {drains} | {s.stuck or '—'} |"
        )
    sources = [s for s in summary if s.kind in ("source", "monovertex")]
    sinks = [s for s in summary if s.kind in ("sink", "monovertex")]
    head = (
        f"# Run report\n\nmessages in (sources): {sum(s.processed for s in sources)}; "
        f"messages out (sinks): {sum(s.processed for s in sinks)}\n\n"
    )
    plots = "\n".join(f"![{s.vertex}]({s.vertex}.png)" for s in summary)
    cluster = summarize_executors(run_dir)
    if cluster is not None:
        _plot_executors(run_dir, rows, start, out / "executors.png")
        (out / "executors.json").write_text(json.dumps(asdict(cluster), indent=1))
        replica_seconds = sum(s.replica_seconds for s in summary)
        head += (
            f"executors: peak {cluster.peak}, {cluster.executor_seconds:g} executor-seconds, "
            f"{cluster.core_seconds:g} core-seconds (replica-seconds {replica_seconds:g}); "
            f"{cluster.startups} start-ups, first task done a median {_or_dash(cluster.first_task_median)} s "
            f"after the request (registered after {_or_dash(cluster.registered_median)} s)\n\n"
        )
        plots += "\n![executors](executors.png)"
    final = final_statuses(run_dir)
    from tidal.observe.vertical import vertical_lines

    vertical = vertical_lines(final.values())
    if vertical:
        head += "vertical, per replica (VPA's recommender, applied at a restart):\n\n"
        head += "".join(f"- {line}\n" for line in vertical) + "\n"
    delays = read_delays(run_dir)
    if delays:
        plot_latency(delays, start or min(v[0].at for v in delays.values()), out / "latency.png")
        head += latency_line(delays)
        plots += "\n![delivery delay](latency.png)"
    requests = read_requests(run_dir)
    if requests:
        plot_requests(requests, start or requests[0]["at"], out / "requests.png")
        head += summary_line(requests)
        plots += "\n![request path](requests.png)"
    (out / "summary.md").write_text(head + "\n".join(lines) + "\n\n" + plots + "\n")
    return out / "summary.md"
