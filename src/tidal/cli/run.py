"""``tidal run PIPELINE.yaml``: run a pipeline with a live view; a report when it stops.

Stops after ``--duration`` seconds, on Ctrl-C or on SIGTERM, always the same way: the controller,
then the queries, then Spark and any server the run started; then the report. A run directory
that already holds a run is resumed from its checkpoints.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from tidal import errors

__all__ = ["default_run_dir", "run_pipeline"]


def default_run_dir(name: str, root: str | Path = "runs") -> Path:
    return Path(root) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _importable(pipeline_file: Path) -> None:
    """UDFs and classes next to the pipeline file import in the driver and in Spark's workers."""
    folder = str(pipeline_file.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([folder, *parts])


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run_pipeline(
    path: str | Path,
    *,
    duration: float | None = None,
    run_dir: str | Path | None = None,
    dry_run: bool = False,
    metrics_port: int | None = 9464,
    live: bool = True,
    master: str = "local[2]",
    until: Any = None,
    console: Console | None = None,
) -> int:
    """Run the pipeline at ``path``; 0 when it ran and stopped cleanly, 1 when a vertex failed,
    2 for an invalid pipeline."""
    from tidal import log
    from tidal.observe.live import status_table
    from tidal.observe.report import write_report
    from tidal.observe.series import SeriesLog
    from tidal.spec import load_pipeline

    log.configure()
    console = console or Console()
    path = Path(path)
    _importable(path)
    try:
        spec = load_pipeline(path)
    except errors.SpecError as exc:
        console.print(f"[red]invalid pipeline {path}[/]:\n{exc}")
        return 2
    except FileNotFoundError:
        console.print(f"[red]no pipeline file at {path}[/]")
        return 2
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(spec.name)
    resumed = (run_dir / "pipeline.db").exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "pipeline.yaml").write_text(path.read_text())

    from tidal.spark.pipeline import PipelineRun, VertexStatus

    run = PipelineRun(spec, run_dir, master=master, dry_run=dry_run)
    series = SeriesLog(run_dir)
    exporter = None
    status = 0
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    console.rule(
        f"[bold]{spec.name}[/]: {len(spec.vertices)} vertices"
        + (" — resumed from its checkpoints" if resumed else "")
        + (" — [yellow]dry run: decisions are shown, not applied[/]" if dry_run else "")
    )
    console.print(f"run directory: {run_dir}")
    view = Live(console=console, refresh_per_second=2, transient=False) if live else None
    try:
        run.start()
        if metrics_port is not None:
            from tidal.observe.metrics import MetricsExporter

            exporter = MetricsExporter(spec.name, run_dir / "events.jsonl")
            try:
                port = exporter.serve(metrics_port)
            except OSError:  # the port is taken: any free one beats no metrics
                port = exporter.serve(0)
            console.print(f"Prometheus metrics: http://127.0.0.1:{port}/metrics")
            (run_dir / "metrics.port").write_text(str(port))

        def every(r: PipelineRun, statuses: list[VertexStatus]) -> None:
            series.record(statuses)
            if exporter is not None:
                exporter.update(statuses)
            if view is not None:
                elapsed = time.time() - r.started_at
                view.update(status_table(statuses, f"{spec.name} — {elapsed:,.0f} s"))

        if view is not None:
            view.start()
        run.wait(duration, every=every, until=until)
    except KeyboardInterrupt:
        console.print("[yellow]stopping[/] (interrupted)")
    except errors.PipelineError as exc:
        console.print(f"[red]pipeline stopped[/]: {exc}")
        console.print(
            "Nothing after the failed micro-batch was committed: fix the UDF (or add a deadLetter) "
            f"and run again with --run-dir {run_dir} to resume from the same messages."
        )
        status = 1
    finally:
        if view is not None:
            view.stop()
        signal.signal(signal.SIGTERM, previous)
        run.stop()
        if exporter is not None:
            exporter.close()
    summary = write_report(run_dir)
    console.print(f"report: {summary} (plots: {summary.parent}/*.png)")
    console.print(f"why did it scale? tidal events {run_dir}")
    return status
