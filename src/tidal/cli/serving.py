"""What ``tidal run`` serves beside the pipeline: Prometheus metrics and the control API.

Both listen on 127.0.0.1 unless told otherwise. Each writes where it listens into the run
directory (``metrics.port``, ``api.json``), so ``tidal status``, ``tidal scale`` and the tests
find them, and a taken port falls back to a free one with a warning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

__all__ = ["API_FILE", "check_api_options", "start_api", "start_metrics"]

API_FILE = "api.json"


def start_metrics(spec: Any, run_dir: Path, port: int, console: Console) -> Any:
    """The Prometheus exporter of the run, on ``port`` (a free one if it is taken)."""
    from tidal.observe.metrics import MetricsExporter

    exporter = MetricsExporter(spec.name, run_dir / "events.jsonl")
    try:
        served = exporter.serve(port)
    except OSError as exc:
        served = exporter.serve(0)
        console.print(
            f"[yellow]metrics port {port} is taken[/] ({escape(exc.strerror or str(exc))}): "
            f"serving on {served} instead (pass --metrics-port to choose)"
        )
    console.print(f"Prometheus metrics: http://127.0.0.1:{served}/metrics")
    (run_dir / "metrics.port").write_text(str(served))
    return exporter


def check_api_options(host: str, auth: str) -> str | None:
    """Why the control API cannot start as asked (None: it can). Checked before Spark starts."""
    from tidal.spec.http import is_loopback

    if auth not in ("token", "none"):
        return f"--api-auth {auth!r}: use token (the default) or none"
    if auth == "none" and not is_loopback(host):
        return (
            f"--api-host {host} with --api-auth none would let anyone who reaches {host} scale, pause and "
            "edit the pipeline: keep the token (drop --api-auth none) or bind to 127.0.0.1"
        )
    return None


def start_api(run: Any, run_dir: Path, port: int, host: str, auth: str, console: Console) -> Any:
    """The control API of ``run`` (:mod:`tidal.api.server`), its address in ``RUN_DIR/api.json``."""
    from tidal.api.auth import ensure_token
    from tidal.api.server import ControlServer
    from tidal.spark.run.operations import RunOperations

    token = ensure_token(run_dir) if auth == "token" else None
    operations = RunOperations(run)
    try:
        server = ControlServer(operations, token).start(port, host)
    except OSError as exc:
        server = ControlServer(operations, token).start(0, host)
        console.print(f"[yellow]control API port {port} is taken[/] ({escape(exc.strerror or str(exc))})")
    record = {"url": server.url, "host": host, "port": server.port, "pipeline": run.spec.name, "auth": auth}
    (run_dir / API_FILE).write_text(json.dumps(record))
    where = (
        "token in " + escape(str(run_dir / "api.token")) if token else "[yellow]no token (loopback only)[/]"
    )
    console.print(f"control API: {escape(server.url)} ({where}; tidal scale / pause / resume / apply)")
    if operations.phase() != "Running":
        console.print(f"[yellow]the pipeline is {operations.phase()}[/]: tidal resume {escape(str(run_dir))}")
    return server
