"""A receiver agent: starts an HTTP source's receivers on its own host, for the driver's run.

Knative's kubelet runs queue-proxies on whichever node the scheduler picks; Spark has no such
thing for a process that is not a task. ``tidal agent --listen ADDR:PORT`` is that piece, one per
worker host (beside its Spark worker): the run of a pipeline whose source lists the host in
``source.http.receiverHosts`` asks it to start receivers, and the activator on the driver's
host forwards requests to them across the network.

* ``GET /agent`` — its address and every receiver it started: pid → exit code (null: running).
* ``POST /receivers`` — a receiver's configuration (:class:`~tidal.request.receiver.ReceiverConfig`
  as JSON). The agent binds it to its own address, starts it, waits for its port and answers
  ``{"pid", "host", "port"}``; a receiver that does not come up answers 500 with the end of its
  log (a buffer it cannot reach, a module it cannot import), and a SQLite buffer is refused
  with 400 (its file is on the driver's host: receivers elsewhere need ``buffers.backend:
  jetstream``).
* ``POST /receivers/PID/signal`` — ``{"signal": 15}``: SIGTERM drains it (it fails its probe and
  finishes what is in flight), SIGKILL ends it.

Every receiver's stderr goes to ``LOG_DIR/receivers.log``. SIGTERM or Ctrl-C to the agent
drains its receivers and exits. With a token (``--token-file``/``--token-env``; the run's is
``source.http.agentToken``), every request needs ``Authorization: Bearer <token>``, else 401:
an agent starts processes, so one that anybody can reach should have one. Bind it to a private
address all the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import signal
import subprocess
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tidal import errors
from tidal.request.auth import bearer_ok, load_token
from tidal.request.children import first_port
from tidal.request.receiver import READY_LINE, ReceiverConfig
from tidal.spec.http import host_port

__all__ = ["Agent", "serve"]

START_TIMEOUT = 30.0  # seconds for a receiver to print its port
DRAIN_TIMEOUT = 30.0  # seconds the receivers get to finish in flight when the agent stops
_SIGNAL = re.compile(r"^/receivers/(\d+)/signal$")


class Agent:
    """The agent's state: the receivers it started (by pid) and where their logs go."""

    def __init__(self, host: str, port: int, log_dir: Path, token: str | None = None) -> None:
        self.host, self.log_dir, self.token = host, log_dir, token
        self._lock = threading.Lock()
        self._receivers: dict[int, subprocess.Popen[str]] = {}
        try:
            self.server = ThreadingHTTPServer((host, port), _handler(self))
        except OSError as exc:
            raise OSError(
                f"the agent cannot listen on {host}:{port}: {exc.strerror or exc}. Give an address of this "
                "host (ip -br addr) and a free port"
            ) from None
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def listing(self) -> dict[str, Any]:
        with self._lock:
            codes = {str(pid): proc.poll() for pid, proc in self._receivers.items()}
        return {"host": self.host, "port": self.port, "receivers": codes}

    def start(self, config: ReceiverConfig) -> dict[str, Any]:
        """Start one receiver bound to this host; its pid and port once it printed them."""
        if config.backend == "sqlite":
            raise errors.ClusterError(
                "the pipeline's buffers are SQLite, a file on the driver's host: receivers on other hosts "
                "need buffers every host reaches (buffers.backend: jetstream)"
            )
        config = dataclasses.replace(config, host=self.host, port=0, public_port=0)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / "receivers.log").open("a") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tidal.request.receiver", config.to_json()],
                stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
            )  # fmt: skip
        try:
            port = first_port(proc.stdout, READY_LINE, START_TIMEOUT)
        except RuntimeError as exc:
            proc.kill()
            proc.wait(timeout=5)
            raise RuntimeError(
                f"a receiver on {self.host} did not start: {exc}; {self._log_tail()}"
            ) from None
        with self._lock:
            self._receivers[proc.pid] = proc
        return {"pid": proc.pid, "host": self.host, "port": port}

    def signal(self, pid: int, sig: int) -> bool:
        with self._lock:
            proc = self._receivers.get(pid)
        if proc is None:
            return False
        if proc.poll() is None:
            proc.send_signal(sig)
        return True

    def stop(self) -> None:
        """Drain every receiver (SIGTERM, then SIGKILL after ``DRAIN_TIMEOUT``), then stop serving."""
        with self._lock:
            procs = list(self._receivers.values())
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + DRAIN_TIMEOUT
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.server.server_close()

    def _log_tail(self) -> str:
        log = self.log_dir / "receivers.log"
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
        return "its log ends: " + " | ".join(tail) if tail else f"see {log}"


def _handler(agent: Agent) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: the run logs what matters
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> Any:
            return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")

        def _allowed(self) -> bool:
            if agent.token is None or bearer_ok(self.headers.get("Authorization", ""), agent.token):
                return True
            self._answer(HTTPStatus.UNAUTHORIZED, {"error": "this agent needs its token: give the run the "
                         "agent's (source.http.agentToken)"})  # fmt: skip
            return False

        def do_GET(self) -> None:
            if not self._allowed():
                return
            if self.path == "/agent":
                self._answer(HTTPStatus.OK, agent.listing())
            else:
                self._answer(HTTPStatus.NOT_FOUND, {"error": f"no {self.path}: GET /agent"})

        def do_POST(self) -> None:
            if not self._allowed():
                return
            try:
                if self.path == "/receivers":
                    config = ReceiverConfig.from_json(json.dumps(self._body()))
                    self._answer(HTTPStatus.OK, agent.start(config))
                elif (match := _SIGNAL.match(self.path)) is not None:
                    found = agent.signal(int(match.group(1)), int(self._body().get("signal", signal.SIGTERM)))
                    self._answer(HTTPStatus.OK if found else HTTPStatus.NOT_FOUND, {"found": found})
                else:
                    self._answer(HTTPStatus.NOT_FOUND, {"error": f"no {self.path}"})
            except (errors.TidalError, ValueError, TypeError, KeyError) as exc:  # refused, naming the fix
                self._answer(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            except RuntimeError as exc:
                self._answer(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})

    return Handler


def serve(listen: str, log_dir: Path, token_file: str | None = None, token_env: str | None = None) -> int:
    """``tidal agent``: serve until SIGTERM or Ctrl-C, then drain the receivers."""
    host, port = host_port(listen)
    token = load_token(token_file, token_env, "--token-file/--token-env")
    agent = Agent(host, port, log_dir, token)
    stopping = threading.Event()

    def stop(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    thread = threading.Thread(target=agent.server.serve_forever, name="tidal-agent", daemon=True)
    thread.start()
    print(f"tidal agent on {agent.address}: receivers bind {host}, logs in {log_dir}", flush=True)
    if token is None:
        print(f"tidal agent: no token: anyone who reaches {agent.address} can start receivers here "
              "(--token-file PATH to require one)", file=sys.stderr, flush=True)  # fmt: skip
    while not stopping.wait(0.5):
        pass
    agent.server.shutdown()
    with contextlib.suppress(OSError):
        agent.stop()
    return 0
