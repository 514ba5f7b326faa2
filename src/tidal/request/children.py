"""The request path's child processes, as the run sees them: a handle per process (a local
``Popen``, or a receiver an agent runs on another host, :mod:`tidal.request.launch`), the port
each prints when it is up (``MARKER PORT …`` on stdout), and small JSON calls."""

from __future__ import annotations

import json
import threading
import urllib.request
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

__all__ = ["Child", "Process", "first_port", "get", "ports", "put"]


class Process(Protocol):
    """What the request path does with a process: ``subprocess.Popen`` has it all; a receiver on
    another host has it through its agent (:class:`tidal.request.launch.RemoteProcess`)."""

    @property
    def pid(self) -> int: ...
    @property
    def stdout(self) -> IO[str] | None: ...
    def poll(self) -> int | None: ...
    def send_signal(self, sig: int) -> None: ...
    def kill(self) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...


@dataclass(slots=True)
class Child:
    proc: Process
    started_at: float
    port: int = 0
    host: str = "127.0.0.1"
    ready_at: float | None = None
    accepted: int = 0
    stopping_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"


def first_port(stream: IO[str] | None, marker: str, timeout: float) -> int:
    """The port a child printed as ``MARKER PORT …`` (read in a thread: readline has no timeout)."""
    return ports(stream, marker, timeout)[0]


def ports(stream: IO[str] | None, marker: str, timeout: float) -> list[int]:
    """Every port on the child's ``MARKER PORT …`` line."""
    found: list[list[int]] = []

    def read() -> None:
        assert stream is not None
        for line in stream:
            if line.startswith(marker):
                found.append([int(p) for p in line.split()[1:]])
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if not found:
        raise RuntimeError(f"no '{marker} <port>' line within {timeout:g} s")
    return found[0]


def put(url: str, body: bytes, timeout: float = 2.0) -> None:
    request = urllib.request.Request(
        url, data=body, method="PUT", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout):  # loopback, or an agent's private address
        pass


def get(url: str, timeout: float = 1.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as answer:  # loopback, or an agent's private address
        body = answer.read()
    return json.loads(body) if body[:1] in (b"{", b"[") else body.decode()
