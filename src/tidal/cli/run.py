"""``tidal run PIPELINE.yaml``: run a pipeline with a live view; a report when it stops.

Stops after ``--duration`` seconds, on Ctrl-C or on SIGTERM, always the same way
(:meth:`~tidal.spark.run.pipeline.PipelineRun.stop`): the sources first, then — with ``--drain`` —
the rest once their buffers are empty, else every query between two micro-batches; then the
final status, counted from what the batches committed, and the report. A second Ctrl-C while
draining stops at once, and the status and report are still written.

A run directory that holds a run of the same pipeline is resumed from its checkpoints; one that
holds another pipeline's run is refused (:mod:`tidal.spark.batch.rundir`), unless ``--reset``.

What a person reads stays readable: Spark's JVM and its Python workers write to
``RUN_DIR/spark.log`` (their traces too), Tidal's own log lines go to the terminal and to
``RUN_DIR/tidal.log``, and the live table is drawn only on a terminal (piped output, ``| tee``
and CI get a plain line per vertex every few seconds).
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape

from tidal import errors
from tidal.cli import interrupts
from tidal.cli.spark_log import spark_output_to
from tidal.isb.durability import disk_full

__all__ = ["default_run_dir", "run_pipeline"]

PLAIN_EVERY = 5.0  # seconds between plain status lines when the output is not a terminal


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


def _plain_line(statuses: list[Any], elapsed: float) -> str:
    parts = []
    for s in statuses:
        replicas = f"{s.replicas}" + (
            f"→{s.desired}" if s.desired is not None and s.desired != s.replicas else ""
        )
        pending = "-" if s.pending is None else f"{s.pending:,.0f}"
        stuck = f" STUCK {s.stuck_for:.0f}s" if getattr(s, "stuck_for", None) else ""
        r = getattr(s, "requests", None)
        http = (
            f" req/s={r['rps']:,.0f} held={r['held']} refused={r['refused']} "
            f"unauthorized={r.get('unauthorized', 0)} "
            f"activator={'in' if r['in_path'] else 'out'}"
            if r and "at" in r
            else ""
        )
        d = getattr(s, "delay", None)
        delay = f" delay p50={d['p50']:.2f}s p99={d['p99']:.2f}s" if d else ""
        parts.append(f"{s.name} r={replicas} pending={pending} done={s.processed:,}{stuck}{http}{delay}")
    return f"[{elapsed:6.0f} s] " + " | ".join(parts)


def _restart(run: Any, run_dir: Path, master: tuple[str, str | None], dry_run: bool, console: Console) -> Any:
    """Drain ``run``, then start its requested spec in the same Spark session and run directory
    (the checkpoints, buffers and sinks' batch identities carry over: the layout is the same)."""
    import json

    import yaml

    from tidal.spark.batch import rundir
    from tidal.spark.run.pipeline import PipelineRun

    new = run.restart_requested
    console.print("[yellow]restarting[/] to apply the edit: sources stopped, draining the buffers")
    spark = run.stop(drain=True, keep_spark=True)
    rundir.adopt(run_dir, new)
    document = json.loads(new.model_dump_json(by_alias=True, exclude_none=True))
    (run_dir / "pipeline.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    fresh = PipelineRun(
        new, run_dir, spark=spark, own_spark=True, master=master[0], master_web=master[1], dry_run=dry_run
    ).start()
    console.print("restarted with the edited spec")
    return fresh


def run_pipeline(
    path: str | Path,
    *,
    duration: float | None = None,
    run_dir: str | Path | None = None,
    dry_run: bool = False,
    reset: bool = False,
    drain: bool = False,
    metrics_port: int | None = 9464,
    live: bool = True,
    master: str | None = None,
    master_ui: str | None = None,
    until: Any = None,
    console: Console | None = None,
    ui_port: int | None = None,
    cluster: str | None = None,
    api: tuple[int, str, str] | None = (0, "127.0.0.1", "token"),
    handlers: str | None = None,
) -> int:
    """Run the pipeline at ``path`` (a Tidal spec or a Numaflow manifest, whose containers
    ``handlers`` may map to pynumaflow handlers: :func:`tidal.cli.convert.read_handlers`); 0 when
    it ran and stopped cleanly, 1 when a vertex failed (or the cluster could not run it), 2 for an
    invalid pipeline or a run directory that is not this pipeline's. ``ui_port`` serves the
    dashboard of this run meanwhile (``tidal run --ui``).

    ``master`` (else ``cluster.master`` in the spec, else ``local[2]``) is where Spark runs, and
    ``master_ui`` a standalone master's web UI when it is not on Spark's default port;
    ``cluster="local:N"`` starts a standalone cluster of N workers on 127.0.0.1 for this run
    (under ``RUN_DIR/cluster``) and stops it afterwards. ``api`` is where the control API listens,
    ``(port, host, auth)`` (:mod:`tidal.cli.serving`); None: no control API."""
    from tidal import log
    from tidal.spec import load_pipeline

    log.configure()
    console = console or Console()
    path = Path(path)
    _importable(path)
    from tidal.cli.convert import read_handlers

    try:
        spec = load_pipeline(path, read_handlers(handlers))
    except errors.SpecError as exc:
        console.print(f"[red]invalid pipeline {escape(str(path))}[/]:\n{escape(str(exc))}")
        return 2
    if api is not None:
        from tidal.cli.serving import check_api_options

        refused = check_api_options(api[1], api[2])
        if refused is not None:
            console.print(f"[red]refused[/]: {escape(refused)}")
            return 2
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(spec.name)
    workers = cores = 0
    if cluster is not None:
        from tidal.spark.cluster.standalone import parse_cluster

        try:
            workers, cores = parse_cluster(cluster)
        except errors.SpecError as exc:
            console.print(f"[red]invalid --cluster[/]: {escape(str(exc))}")
            return 2
    master = master or spec.cluster.master or "local[2]"

    from tidal.spark.batch import rundir

    if reset:
        rundir.reset(run_dir)
    try:
        resumed = rundir.claim(run_dir, spec)
    except errors.RunDirectoryError as exc:
        console.print(f"[red]refused[/]: {escape(str(exc))}")
        return 2
    (run_dir / "pipeline.yaml").write_text(path.read_text())
    file_log = logging.FileHandler(run_dir / "tidal.log")
    file_log.setFormatter(logging.Formatter("%(asctime)s %(levelname)-5s %(name)s %(message)s"))
    logging.getLogger("tidal").addHandler(file_log)
    dashboard = None
    if ui_port is not None:
        from tidal.ui.server import Dashboard

        try:
            dashboard = Dashboard([run_dir]).start(ui_port)
        except OSError as exc:
            dashboard = Dashboard([run_dir]).start(0)
            console.print(
                f"[yellow]dashboard port {ui_port} is taken[/] ({escape(exc.strerror or str(exc))})"
            )
        console.print(f"dashboard: {dashboard.url}")
    embedded = None
    try:
        if workers:
            from tidal.spark.cluster.standalone import StandaloneCluster

            console.print(f"starting a standalone cluster on 127.0.0.1: {workers} workers × {cores} cores")
            try:
                embedded = StandaloneCluster(run_dir / "cluster", workers=workers, cores=cores).start()
            except errors.TidalError as exc:
                console.print(f"[red]the cluster did not start[/]: {escape(str(exc))}")
                return 1
            assert embedded.info is not None
            master = embedded.info.master
            from tidal.spark.cluster.standalone import check_capacity

            try:
                check_capacity(spec.cluster, master, embedded.info.web)
            except errors.ClusterError as exc:
                console.print(f"[red]the cluster cannot run this pipeline[/]: {escape(str(exc))}")
                return 1
            console.print(f"cluster up: {master} (its logs: {escape(str(run_dir / 'cluster' / 'logs'))})")
        with spark_output_to(run_dir / "spark.log"):
            return _run(
                spec,
                path,
                run_dir,
                resumed,
                console,
                duration,
                dry_run,
                drain,
                metrics_port,
                live,
                (master, embedded.info.web if embedded is not None and embedded.info else master_ui),
                until,
                api,
            )
    finally:
        if embedded is not None:
            embedded.stop()
        logging.getLogger("tidal").removeHandler(file_log)
        file_log.close()
        if dashboard is not None:
            dashboard.stop()


def _run(
    spec: Any,
    path: Path,
    run_dir: Path,
    resumed: bool,
    console: Console,
    duration: float | None,
    dry_run: bool,
    drain: bool,
    metrics_port: int | None,
    live: bool,
    master: tuple[str, str | None],  # its URL, and its web UI when known (the embedded cluster's)
    until: Any,
    api: tuple[int, str, str] | None,
) -> int:
    from tidal.cli.serving import API_FILE, start_api, start_metrics
    from tidal.observe.live import status_table
    from tidal.observe.report import write_report
    from tidal.observe.series import SeriesLog
    from tidal.spark.run.pipeline import PipelineRun, VertexStatus
    from tidal.spec.graph import http_sources as http_names

    run = PipelineRun(spec, run_dir, master=master[0], master_web=master[1], dry_run=dry_run)
    series = SeriesLog(run_dir)
    exporter = api_server = None
    status = 0
    interrupts.clear()
    previous = interrupts.install()  # SIGINT again once Spark started: its context takes SIGINT
    console.rule(
        f"[bold]{escape(spec.name)}[/]: {len(spec.vertices)} vertices"
        + (" — resumed from its checkpoints" if resumed else "")
        + (" — [yellow]dry run: decisions are shown, not applied[/]" if dry_run else "")
    )
    console.print(f"run directory: {escape(str(run_dir))} (Spark's own log: spark.log there)")
    queries = len(run.plan.chains) - sum(1 for c in run.plan.chains if c.head in http_names(spec))
    console.print(f"chaining: {len(spec.vertices)} vertices in {queries} Spark queries")
    for line in run.plan.describe():
        console.print(f"  {escape(line)}")
    for chain in run.plan.chains:
        if chain.unused:
            console.print(
                f"  [yellow]{escape(', '.join(chain.unused))}: not used (chain: true runs it in "
                f"{escape(chain.head)}'s query, with the settings an earlier member of the chain asks for); "
                "without chain: true the edge keeps its buffer and the vertex its own settings[/]"
            )
    if dry_run:
        console.print(
            "dry run: the pipeline runs for real — it reads its sources and writes its sinks, in this run "
            "directory — and every scaling decision is shown and logged but none is applied."
        )
    view = (
        Live(console=console, refresh_per_second=2, transient=False) if live and console.is_terminal else None
    )
    plain_at = [0.0]
    try:
        try:
            run.start()
            interrupts.install()
        except errors.SpecError as exc:  # what only Spark can check: a step's SQL, schema, result
            run.stop()
            console.print(f"[red]invalid pipeline {escape(str(path))}[/]:\n{escape(str(exc))}")
            return 2
        except (errors.RunDirectoryError, errors.BufferError) as exc:  # state a crash damaged
            run.stop()
            console.print(f"[red]refused[/]: {escape(str(exc))}")
            return 2
        if metrics_port is not None:
            exporter = start_metrics(spec, run_dir, metrics_port, console)
        if api is not None:
            api_server = start_api(run, run_dir, api[0], api[1], api[2], console)

        def every(r: PipelineRun, statuses: list[VertexStatus]) -> None:
            series.record(statuses)
            executors = r.executors()
            if exporter is not None:
                exporter.update(statuses)
                exporter.update_delays(
                    r.delivered_delays, [v.name for v in r.spec.vertices if v.sink is not None]
                )
                if executors is not None:
                    exporter.update_executors(*executors)
            elapsed = time.time() - r.started_at
            on = "" if executors is None else f" — {executors[0]} executors ({executors[1]} cores)"
            if view is not None:
                view.update(
                    status_table(statuses, f"{spec.name} — {elapsed:,.0f} s{on}", width=console.width)
                )
            elif live and time.monotonic() - plain_at[0] >= PLAIN_EVERY:
                plain_at[0] = time.monotonic()
                console.print(escape(_plain_line(statuses, elapsed) + on), soft_wrap=True)

        if view is not None:
            view.start()
        deadline = None if duration is None else time.monotonic() + duration
        while True:  # a restart asked through the control API (tidal apply --restart) goes round again
            left = None if deadline is None else max(0.0, deadline - time.monotonic())

            def asked(current: PipelineRun = run) -> bool:
                return current.restart_requested is not None or bool(until is not None and until())

            run.wait(left, every=every, until=interrupts.checked(asked))
            if run.restart_requested is None:
                break
            run = _restart(run, run_dir, master, dry_run, console)
            if api_server is not None:
                from tidal.spark.run.operations import RunOperations

                api_server.operable = RunOperations(run)
    except KeyboardInterrupt:
        console.print(
            "[yellow]stopping[/] (interrupted)" + ("; draining — Ctrl-C again to stop now" if drain else "")
        )
    except errors.ClusterError as exc:
        console.print(f"[red]the cluster cannot run this pipeline[/]: {escape(str(exc))}")
        status = 1
        drain = False
    except (errors.PipelineError, OSError, sqlite3.Error) as exc:
        if not isinstance(exc, errors.PipelineError) and not disk_full(str(exc)):
            raise
        console.print(f"[red]pipeline stopped[/]: {escape(str(exc))}")
        cause = (
            "the disk is full (the run directory's or a sink's): nothing was acknowledged upstream that "
            "is not stored; free space"
            if disk_full(str(exc))
            else "fix the cause (or add a deadLetter)"
        )
        console.print(
            f"Nothing after the failed micro-batch was committed: {cause} "
            f"and run again with --run-dir {escape(str(run_dir))} to resume from the same messages."
        )
        status = 1
        drain = False
    finally:
        if view is not None:
            view.stop()
        try:  # still with Tidal's handlers: a second Ctrl-C while draining stops now
            run.stop(drain=drain)
        except KeyboardInterrupt:
            console.print("[yellow]stopping now[/] (second interrupt)")
            run.stop(drain=False)
        finally:
            interrupts.restore(previous)
        if exporter is not None:
            exporter.close()
        if api_server is not None:
            api_server.stop()
            (run_dir / API_FILE).unlink(missing_ok=True)
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the report is written whatever comes
    try:
        summary = write_report(run_dir)
    except OSError as exc:  # a full disk: the run's outcome above stands; the report is what is lost
        console.print(f"[yellow]the report was not written[/]: {escape(str(exc))}")
        return status
    finally:
        signal.signal(signal.SIGINT, interrupt)
    console.print(f"report: {escape(str(summary))} (plots: {escape(str(summary.parent))}/*.png)")
    console.print(f"why did it scale? tidal events {escape(str(run_dir))}")
    return status
