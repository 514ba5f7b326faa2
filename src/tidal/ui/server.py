"""The dashboard's HTTP server: the page, a JSON snapshot per run, and Server-Sent Events.

Standard library only (``http.server``, one thread per connection): the page is a handful of
static files shipped in the package (no CDN: many production networks cannot reach one, and
neither can this project's machines), and updates are pushed over SSE — a plain HTTP response
that stays open, which every browser reconnects by itself — rather than polled with reloads.

Read-only: the server opens the run directories' files for reading and nothing else. It binds
to 127.0.0.1 unless the caller asks for another address.

Routes:
  ``/``                     the page (``static/index.html``, ``app.js``, ``app.css``)
  ``/api/runs``             the runs served: ``[{"id", "run", "path"}]``
  ``/api/runs/<id>``        a snapshot of one run: graph, status, series, events, faults
  ``/api/runs/<id>/stream`` SSE: ``update`` events with what changed (status, new rows, events, faults)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from tidal.ui.runs import RunReader

__all__ = ["Dashboard"]

log = logging.getLogger("tidal.ui")

_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css"}
PUSH_EVERY = 0.5  # seconds between checks for changes on a stream
KEEPALIVE_EVERY = 15.0  # an SSE comment so proxies keep an idle stream open


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            if path in ("/", "/index.html"):
                self._static("index.html")
            elif path.startswith("/static/"):
                self._static(path.removeprefix("/static/"))
            elif path == "/api/runs":
                self._json(
                    [{"id": i, "run": r.name, "path": str(r.path)} for i, r in enumerate(self.server.runs)]
                )
            elif path.startswith("/api/runs/"):
                parts = path.removeprefix("/api/runs/").split("/")
                run = self._run(parts[0])
                if run is None:
                    return
                if len(parts) == 1:
                    self._json(RunReader(run.path).snapshot())
                elif parts[1:] == ["stream"]:
                    self._stream(RunReader(run.path))
                else:
                    self._error(HTTPStatus.NOT_FOUND, f"no such route: {path}")
            else:
                self._error(HTTPStatus.NOT_FOUND, f"no such page: {path}")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away
        except Exception as exc:  # the page shows an error; the server keeps serving
            log.exception("dashboard request %s failed", path)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")

    def _run(self, key: str) -> RunReader | None:
        if not key.isdigit() or int(key) >= len(self.server.runs):
            self._error(HTTPStatus.NOT_FOUND, f"no run {key!r} (runs: 0..{len(self.server.runs) - 1})")
            return None
        return self.server.runs[int(key)]

    def _static(self, name: str) -> None:
        if "/" in name or name.startswith("."):
            self._error(HTTPStatus.NOT_FOUND, "no such file")
            return
        resource = resources.files("tidal.ui").joinpath("static", name)
        if not resource.is_file():
            self._error(HTTPStatus.NOT_FOUND, f"no such file: {name}")
            return
        body = resource.read_bytes()
        self._send(HTTPStatus.OK, _TYPES.get(Path(name).suffix, "application/octet-stream"), body)

    def _json(self, value: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        self._send(status, "application/json", json.dumps(value, default=str).encode())

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._json({"error": message}, status)

    def _send(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, run: RunReader) -> None:
        """SSE: the first ``update`` is a full snapshot; then only what changed."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self._event("snapshot", run.snapshot())
        quiet_since = time.monotonic()
        while not self.server.stopping.is_set():
            update = run.updates()
            if update is not None:
                self._event("update", update)
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > KEEPALIVE_EVERY:
                self.wfile.write(b": keep-alive\n\n")
                self.wfile.flush()
                quiet_since = time.monotonic()
            self.server.stopping.wait(PUSH_EVERY)

    def _event(self, kind: str, data: Any) -> None:
        payload = json.dumps(data, default=str)
        self.wfile.write(f"event: {kind}\ndata: {payload}\n\n".encode())
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    runs: list[RunReader]
    stopping: threading.Event


class Dashboard:
    """``Dashboard(run_dirs).start(port)`` … ``url`` … ``stop()``: serves in a thread."""

    def __init__(self, run_dirs: Sequence[str | Path], host: str = "127.0.0.1") -> None:
        self.runs = [RunReader(Path(p)) for p in run_dirs]
        self.host = host
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, port: int = 0) -> Dashboard:
        """Listen on ``host:port`` (0: a free port); raises ``OSError`` when it is taken."""
        server = _Server((self.host, port), _Handler)
        server.runs = self.runs
        server.stopping = threading.Event()
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="tidal-ui", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def stop(self) -> None:
        if self._server is not None:
            self._server.stopping.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
