"""``tidal scale``, ``tidal get scale``, ``tidal pause``, ``tidal resume``, ``tidal apply``: the
control API of a running pipeline (:mod:`tidal.api.server`), from the command line.

Each command finds the run's API in ``RUN_DIR/api.json`` and its bearer token in
``RUN_DIR/api.token`` (which only its owner may read), so it works from any terminal of the
machine the run is on; from elsewhere, use the HTTP API with the token (docs/api.md).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tidal import errors

__all__ = ["apply", "get_scale", "partitions", "pause", "resume", "scale"]

MOVE_TIMEOUT = 600.0  # a move answers once the vertex ran its first batch after it

MANAGER = "tidal-cli"  # Kubernetes' fieldManager: who wrote it, in the run's events


class _Refused(Exception):
    pass


def _api(run_dir: Path) -> tuple[str, str | None]:
    from tidal.api.auth import read_token
    from tidal.cli.serving import API_FILE

    where = run_dir / API_FILE
    if not where.exists():
        raise _Refused(
            f"{run_dir} has no {API_FILE}: no `tidal run` serves it now (is the run started, with its "
            "control API on?)"
        )
    record = json.loads(where.read_text())
    token = read_token(run_dir) if record.get("auth", "token") == "token" else None
    return str(record["url"]), token


def _call(
    run_dir: Path, method: str, path: str = "", body: Any = None, content_type: str = "application/json",
    timeout: float = 60.0,
) -> dict[str, Any]:  # fmt: skip
    url, token = _api(run_dir)
    data = None if body is None else json.dumps(body).encode()
    sep = "&" if "?" in path else "?"
    request = urllib.request.Request(
        f"{url}{path}{sep}fieldManager={MANAGER}" if method != "GET" else f"{url}{path}",
        data=data,
        method=method,
    )
    request.add_header("Content-Type", content_type)
    request.add_header("User-Agent", "tidal-cli")
    if token is not None and method != "GET":
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("message", exc.reason)
        except ValueError:
            message = exc.reason
        raise _Refused(f"{exc.code}: {message}") from None
    except urllib.error.URLError as exc:
        raise _Refused(
            f"cannot reach the run's control API at {url} ({exc.reason}): is the run still going?"
        ) from None


def _run(console: Console, action: Any) -> int:
    try:
        return int(action())
    except (_Refused, errors.TidalError, OSError, ValueError) as exc:
        console.print(f"[red]refused[/]: {escape(str(exc))}")
        return 1


def scale(run_dir: str | Path, vertex: str, replicas: int, console: Console | None = None) -> int:
    """``tidal scale RUN_DIR VERTEX --replicas N``: a merge patch of the vertex's Scale."""
    console = console or Console()

    def act() -> int:
        answer = _call(
            Path(run_dir), "PATCH", f"/vertices/{vertex}/scale", {"spec": {"replicas": replicas}},
            "application/merge-patch+json",
        )  # fmt: skip
        after = answer["metadata"]["annotations"].get("tidal.dev/after-write", "")
        console.print(f"{escape(vertex)} scaled to {answer['spec']['replicas']}: {escape(after)}")
        return 0

    return _run(console, act)


def partitions(run_dir: str | Path, vertex: str, count: int, console: Console | None = None) -> int:
    """``tidal scale RUN_DIR VERTEX --partitions N``: move a reduce vertex's state to ``N``
    partitions; waits until the vertex runs again (:mod:`tidal.spark.run.repartition`)."""
    console = console or Console()

    def act() -> int:
        console.print(f"moving {escape(vertex)}'s state to {count} partitions (its query pauses)")
        answer = _call(
            Path(run_dir), "PATCH", f"/vertices/{vertex}/partitions", {"spec": {"partitions": count}},
            "application/merge-patch+json", timeout=MOVE_TIMEOUT,
        )  # fmt: skip
        console.print(
            escape(answer["status"].get("message", f"{vertex}: {answer['spec']['partitions']} partitions"))
        )
        return 0

    return _run(console, act)


def get_scale(run_dir: str | Path, vertex: str | None = None, console: Console | None = None) -> int:
    """``tidal get scale RUN_DIR [VERTEX]``: the Scale of one vertex, or a table of all."""
    console = console or Console()

    def act() -> int:
        if vertex is not None:
            console.print_json(json.dumps(_call(Path(run_dir), "GET", f"/vertices/{vertex}/scale")))
            return 0
        table = Table("vertex", "spec", "status", "min", "max", "autoscaling", "chained into")
        for item in _call(Path(run_dir), "GET", "/vertices")["items"]:
            notes = item["metadata"]["annotations"]
            table.add_row(
                item["metadata"]["name"], str(item["spec"]["replicas"]), str(item["status"]["replicas"]),
                notes["tidal.dev/min"], notes["tidal.dev/max"], notes["tidal.dev/autoscaling"],
                notes.get("tidal.dev/chained-into", ""),
            )  # fmt: skip
        console.print(table)
        return 0

    return _run(console, act)


def _wait_phase(run_dir: Path, wanted: str, timeout: float, console: Console) -> int:
    deadline = time.monotonic() + timeout
    phase = ""
    while time.monotonic() < deadline:
        phase = _call(run_dir, "GET")["status"]["phase"]
        if phase == wanted:
            console.print(f"pipeline {wanted.lower()}")
            return 0
        time.sleep(0.5)
    console.print(
        f"[yellow]still {phase} after {timeout:g} s[/]; tidal status {escape(str(run_dir))} follows it"
    )
    return 1


def pause(
    run_dir: str | Path, *, drain: bool = True, timeout: float = 120.0, console: Console | None = None
) -> int:
    """``tidal pause RUN_DIR [--no-drain]``: Numaflow's ``desiredPhase: Paused``; waits until paused."""
    console = console or Console()
    lifecycle = {"desiredPhase": "Paused", "drain": drain, "pauseGracePeriodSeconds": timeout}

    def act() -> int:
        _call(Path(run_dir), "PATCH", "", {"spec": {"lifecycle": lifecycle}}, "application/merge-patch+json")
        console.print("pausing: sources closed" + (", draining the buffers" if drain else ""))
        return _wait_phase(Path(run_dir), "Paused", timeout + 60, console)

    return _run(console, act)


def resume(run_dir: str | Path, console: Console | None = None) -> int:
    """``tidal resume RUN_DIR``: back to the replicas the pipeline had when it paused."""
    console = console or Console()

    def act() -> int:
        lifecycle = {"desiredPhase": "Running"}
        _call(Path(run_dir), "PATCH", "", {"spec": {"lifecycle": lifecycle}}, "application/merge-patch+json")
        console.print("pipeline resumed")
        return 0

    return _run(console, act)


def apply(
    pipeline: str | Path, run_dir: str | Path, *, restart: bool = False, timeout: float = 600.0,
    console: Console | None = None,
) -> int:  # fmt: skip
    """``tidal apply PIPELINE.yaml --run-dir D [--restart]``: a live edit of the running pipeline;
    with ``--restart``, what needs a restart too (a drain, then a restart), waited for."""
    console = console or Console()

    def act() -> int:
        import yaml

        document = yaml.safe_load(Path(pipeline).read_text())
        answer = _call(Path(run_dir), "PUT", "?restart=true" if restart else "", document)
        changes = answer.get("details", {}).get("changes", [])
        if not changes:
            console.print("nothing to change: the running pipeline already has these settings")
        for line in changes:
            console.print(f"applied: {escape(line)}")
        if restart and changes and changes[0].startswith("restarting"):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    state = _call(Path(run_dir), "GET")
                except _Refused:  # between the two runs
                    state = {"metadata": {"generation": 1}, "status": {"observedGeneration": 0}}
                if state["status"]["observedGeneration"] >= state["metadata"]["generation"]:
                    console.print("restarted with the edited spec")
                    return 0
                time.sleep(0.5)
            console.print(
                f"[yellow]not restarted after {timeout:g} s[/]: tidal status {escape(str(run_dir))}"
            )
            return 1
        return 0

    return _run(console, act)
