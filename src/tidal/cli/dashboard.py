"""``tidal ui RUN_DIR…``: serve the dashboard until Ctrl-C."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from rich.console import Console
from rich.markup import escape

__all__ = ["serve"]


def serve(run_dirs: list[str], *, port: int = 8470, host: str = "127.0.0.1") -> int:
    """Serve ``run_dirs`` side by side; 2 when the port cannot be had."""
    from tidal.ui.server import Dashboard

    console = Console()
    missing = [d for d in run_dirs if not Path(d).is_dir()]
    for d in missing:  # still served: the page says what is wrong with it
        console.print(f"[yellow]{escape(d)} is not a directory[/]: the page will show why")
    try:
        dashboard = Dashboard(run_dirs, host=host).start(port)
    except OSError as exc:
        reason = escape(exc.strerror or str(exc))
        console.print(f"[red]cannot listen on {escape(host)}:{port}[/]: {reason} (try --port 0)")
        return 2
    if host not in ("127.0.0.1", "localhost", "::1"):
        console.print(f"[yellow]listening on {escape(host)}: reachable from other machines[/]")
    console.print(f"dashboard: {dashboard.url}  (Ctrl-C to stop)")
    done = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        dashboard.stop()
    return 0
