"""``tidal demo`` (what ``make demo`` runs): the wave pipeline, scaled live, then its report.

``tidal/examples/wave.yaml`` (it ships in the package): a generator sends waves of orders, a
Python UDF with 2 ms of latency per order enriches them, a file sink archives them. In about two
and a half minutes on Spark's local mode it shows the whole cycle: scale-up under the first
wave, scale-down after it, scale to zero in the quiet spell, the wake-up when the second wave
arrives. Then it stops the generator and drains (a slow machine may still be working through
the second wave at the stop; Ctrl-C drains too, Ctrl-C again stops at once), checks that every
order arrived exactly once, says how many still wait in the buffers if the drain was cut short,
and prints where the report and the decisions are.

``tidal demo --cluster`` runs the same on a standalone cluster it starts on 127.0.0.1 (four
two-core workers): the replicas become executors, requested under the wave and killed after it
(``RUN_DIR/executors.jsonl`` and the report's executor panel show them).
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

PIPELINE = Path(__file__).resolve().parents[1] / "examples" / "wave.yaml"
DURATION = 160.0  # two waves (at 0 s and 110 s, 40 s each) and the drain of the second
MASTER = "local[6]"  # task slots: sleeping UDF tasks run side by side even on 2 cores


CLUSTER = "local:4x2"  # tidal demo --cluster: four two-core workers on 127.0.0.1


def run(duration: float | None = None, run_root: str | Path = "runs", cluster: bool = False) -> int:
    from tidal.cli.run import default_run_dir, run_pipeline

    console = Console()
    if not PIPELINE.exists():
        console.print(f"[red]the demo pipeline is missing: {PIPELINE}[/] (reinstall tidal)")
        return 2
    run_dir = default_run_dir("demo", run_root)
    console.print(
        "[bold]Tidal demo[/]: waves of orders → enrich (Python UDF, 2 ms/order, on Spark) → archive.\n"
        "Watch [cyan]enrich[/]: up under the wave, down after it, to zero when quiet, woken by the next wave."
    )
    status = run_pipeline(
        PIPELINE,
        duration=duration or DURATION,
        run_dir=run_dir,
        master=None if cluster else MASTER,
        cluster=CLUSTER if cluster else None,
        metrics_port=0,
        console=console,
        drain=True,
    )
    if status != 0:
        return status
    return _check(run_dir, console)


def _check(run_dir: Path, console: Console) -> int:
    """Every order that reached the archive arrived once; the cycle happened."""
    archive = run_dir / "orders.jsonl"
    ids = [json.loads(line)["id"] for line in archive.read_text().splitlines()] if archive.exists() else []
    once = len(ids) == len(set(ids))
    from tidal.controller.events import EventLog

    enrich = [e for e in EventLog(run_dir / "events.jsonl").read() if e.vertex == "enrich"]
    rules = [str(e.rule) for e in enrich if e.changed]
    peak = max([e.desired for e in enrich], default=0)
    waiting = _waiting(run_dir)
    console.print(
        f"{len(ids):,} orders archived, "
        + ("[green]each exactly once[/]" if once else "[red]DUPLICATES FOUND[/]")
        + f"; enrich peaked at {peak} replicas; its changes: {' → '.join(rules) or 'none'}"
    )
    if waiting:
        console.print(
            f"[yellow]{waiting:,} orders still wait in the buffers[/] (the drain was cut short; they are "
            f"stored, not lost): tidal run {escape(str(PIPELINE))} --run-dir {escape(str(run_dir))} "
            "resumes them",
            soft_wrap=True,  # a command to copy: not broken across lines
        )
    return 0 if once and ids else 1


def _waiting(run_dir: Path) -> int:
    """Messages left in the input buffers at the stop, from the final status (written after
    every query stopped); 0 when it is missing or not final."""
    from tidal.observe.report import final_statuses

    return sum(
        int(v.get("pending") or 0) for v in final_statuses(run_dir).values() if v.get("kind") != "source"
    )
