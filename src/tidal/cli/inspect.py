"""``tidal events RUN_DIR`` and ``tidal status RUN_DIR``: read a run, live or finished."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tidal.controller.events import EventLog
from tidal.controller.faults import FAULTS_FILE, read_faults

__all__ = ["show_events", "show_status"]


def show_events(run_dir: str | Path, vertex: str | None = None, changes_only: bool = False) -> int:
    """Every recorded decision with its reason: the answer to "why did it scale?"."""
    console = Console()
    path = Path(run_dir) / "events.jsonl"
    # A run stuck before its controller started (executors that never come) has no decisions yet,
    # but its executors' records and faults say why.
    others = [Path(run_dir) / name for name in ("executors.jsonl", FAULTS_FILE)]
    if not path.exists() and not any(p.exists() for p in others):
        console.print(f"[red]no events at {path}[/] (is {run_dir} a run directory?)")
        return 2
    from tidal.spark.cluster.executors import read_executor_log

    events = list(EventLog(path).read())
    # On a cluster manager the executor allocator's decisions come in order with the vertices'.
    log = read_executor_log(run_dir)
    executors = [] if vertex is not None else log["decision"]
    lost = [] if vertex is not None else log["lost"]
    failed = [] if vertex is not None else log.get("start failed", [])
    faults = read_faults(run_dir)  # what happened to the run: a receiver or a buffer server lost
    times = [e.at for e in events] + [d["at"] for d in executors] + [f["at"] for f in faults]
    start = min(times, default=0.0)
    rows: list[tuple[float, str, str, str, str]] = []
    for e in events:
        if vertex is not None and e.vertex != vertex:
            continue
        if changes_only and not e.changed:
            continue
        replicas = f"{e.current} → {e.desired}" if e.changed else str(e.current)
        rows.append((e.at, e.vertex, replicas, str(e.rule), e.reason))
    for d in executors:
        changed = d["target"] != d["requested"] or d["kill"]
        if changes_only and not changed:
            continue
        count = f"{d['registered']} → {d['target']}" if d["target"] != d["registered"] else str(d["target"])
        rows.append((d["at"], "(executors)", count, d["rule"], d["reason"]))
    for d in lost:  # a fault, with Spark's cause: always a change
        rows.append(
            (d["at"], "(executors)", "-1", "lost", f"executor {d['id']} on {d['host']}: {d['reason']}")
        )
    for d in failed:  # executors dead before registering, with their own words; then a back-off
        why = f"{d['reason']}; next try in {d['retry_in']:g} s"
        rows.append((d["at"], "(executors)", "", "start failed", why))
    decided = len(rows)
    faults = [f for f in faults if vertex is None or f["who"] == vertex]
    for f in faults:  # what happened to the run, with its cause: shown whatever --changes says
        rows.append((f["at"], f["who"], "", f["kind"], f["reason"]))
    table = Table(title=f"decisions in {run_dir}")
    for column in ("t (s)", "vertex", "replicas", "rule", "reason"):
        table.add_column(column, overflow="fold")
    for at, who, replicas, rule, reason in sorted(rows, key=lambda r: r[0]):
        table.add_row(f"{at - start:,.1f}", escape(who), replicas, escape(rule), escape(reason))
    console.print(table)
    shown = sum(1 for r in rows[:decided] if r[1] != "(executors)")
    console.print(
        f"{shown} of {len(events)} decisions shown"
        + (f", and {decided - shown} of the executor allocator's" if executors else "")
        + (f"; {len(faults)} faults" if faults else "")
    )
    return 0


def show_status(run_dir: str | Path) -> int:
    """The state of a run from its ``status.json`` (written every half second while it runs)."""
    from tidal.observe.live import status_table
    from tidal.spark.run.pipeline import VertexStatus

    console = Console()
    path = Path(run_dir) / "status.json"
    if not path.exists():
        console.print(f"[red]no status at {path}[/] (is {run_dir} a run directory?)")
        return 2
    record = json.loads(path.read_text())
    age = time.time() - record["at"]
    if record.get("state") == "stopped":
        state = f"[yellow]not running[/] (stopped {age:,.0f} s ago)"
    elif age < 5:
        phase = record.get("phase", "Running")
        state = (
            "[green]running[/]"
            if phase == "Running"
            else f"[yellow]{phase.lower()}[/] (tidal resume to go on)"
        )
    else:  # no clean stop recorded: killed, or the machine went down
        state = f"[red]not running[/] (no update for {age:,.0f} s; it did not stop cleanly)"

    up = record["at"] - record["started_at"]
    console.print(f"pipeline [bold]{record['pipeline']}[/]: {state}, up {up:,.0f} s")
    console.print(status_table([VertexStatus(**v) for v in record["vertices"]], width=console.width))
    from tidal.observe.vertical import vertical_lines

    lines = vertical_lines(record["vertices"])
    if lines:
        console.print("vertical (VPA's recommender; a restart applies it, docs/api.md):")
        for line in lines:
            console.print(f"  {escape(line)}")
    report = Path(run_dir) / "report" / "summary.md"
    if report.exists():
        console.print(f"report: {report}")
    return 0
