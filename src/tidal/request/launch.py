"""Where an HTTP source's receivers run: beside the driver, or on worker hosts through their agents.

:class:`LocalLauncher` starts each receiver as a child process on loopback (one host).
:class:`AgentLauncher` asks the agents of ``source.http.receiverHosts`` (``tidal agent``,
:mod:`tidal.request.agent`) to start it on their hosts, bound to the host's address, each new
one on the host that runs the fewest; the activator then forwards across the network.

**A lost host.** An agent that has not answered for ``LOST_AFTER`` seconds is a lost host: its
receivers count as exited (SIGKILL's code), so the request path drops them, tells the activator
(which stops sending there) and starts their replacements on the hosts left. Kubernetes waits
40 s (``node-monitor-grace-period``) before it calls a node gone; a receiver's host is called
gone after 3 s of silence, since a false alarm costs one receiver started too many, not lost data
(what a receiver acknowledged is in the buffers). A host that answers again takes receivers again.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import logging
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tidal import errors
from tidal.request.children import Child, Process, first_port
from tidal.request.receiver import READY_LINE, ReceiverConfig

__all__ = [
    "AgentClient",
    "AgentLauncher",
    "Launcher",
    "LocalLauncher",
    "RemoteProcess",
    "exit_reason",
    "launcher_for",
]

log = logging.getLogger("tidal.request")

START_TIMEOUT = 30.0  # seconds for a receiver to print its port
LOST_AFTER = 3.0  # seconds without an answer from an agent before its host counts as lost
LOST_CODE = -int(signal.SIGKILL)  # what a receiver on a lost host exited with, for the run
_FRESH = 0.5  # seconds an agent's listing is reused before it is asked again
# Seconds for an agent's host to take the connection, whatever the call's own timeout: a host cut
# off answers no SYN, and a receiver's start (35 s to answer) sent to one blocked every start of
# that scale-up, on the hosts left too, for 35 s (tidal bench chaos-receivers found it). The
# activator's connect timeout, for the same reason.
CONNECT_TIMEOUT = 2.0


class Launcher:
    """Starts ``count`` receivers; those that came up, as the request path's children."""

    shares_port = True  # receivers on the activator's host can take its public port (SO_REUSEPORT)

    def start(self, config: ReceiverConfig, count: int) -> list[Child]:
        raise NotImplementedError


@dataclass
class LocalLauncher(Launcher):
    """Receivers as child processes of the run, on loopback (their stderr into ``log_dir``)."""

    log_dir: Path

    def start(self, config: ReceiverConfig, count: int) -> list[Child]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        procs = []
        for _ in range(count):  # all at once: each takes about half a second to import
            with (self.log_dir / "receivers.log").open("a") as err:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "tidal.request.receiver", config.to_json()],
                        stdout=subprocess.PIPE, stderr=err, text=True,
                        start_new_session=True,  # a Ctrl-C reaches the run, which stops these by PID
                    )
                )  # fmt: skip
        started = []
        for proc in procs:
            child = Child(proc, time.time())
            try:
                child.port = first_port(proc.stdout, READY_LINE, START_TIMEOUT)
            except RuntimeError as exc:
                log.warning("http source %s: a receiver did not start: %s", config.vertex, exc)
                proc.kill()
                proc.wait(timeout=5)
                continue
            started.append(child)
        return started


def _call(url: str, body: dict[str, Any] | None, timeout: float, token: str | None = None) -> Any:
    """One call to an agent: ``CONNECT_TIMEOUT`` to connect, then ``timeout`` for its answer. A
    refusal (4xx, 5xx) is a ``RuntimeError`` with the agent's reason; no answer is an ``OSError``."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    parts = urllib.parse.urlsplit(url)
    connect = min(timeout, CONNECT_TIMEOUT)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=connect)
    try:
        connection.connect()
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        connection.request("GET" if data is None else "POST", parts.path or "/", body=data, headers=headers)
        answer = connection.getresponse()
        payload = answer.read()
    except http.client.HTTPException as exc:  # a garbled answer: no answer, for the callers
        raise OSError(f"{url}: {type(exc).__name__}: {exc}") from None
    finally:
        connection.close()
    if answer.status >= 400:  # the agent's own answer: its reason, said on
        raise RuntimeError(json.loads(payload or b"{}").get("error", f"HTTP {answer.status}"))
    return json.loads(payload)


class AgentClient:
    """One agent, as the run sees it: its receivers' exit codes (cached for ``_FRESH`` s) and
    whether its host is lost."""

    def __init__(self, address: str, token: str | None = None) -> None:
        self.address, self.token = address, token
        self.url = f"http://{address}"
        self._lock = threading.Lock()
        self._codes: dict[int, int | None] = {}
        self._asked_at = 0.0
        self._answered_at = time.monotonic()
        self.lost = False

    def check(self, field: str) -> None:
        """At start: the agent answers, or the run stops naming it (``field``) and the fix."""
        try:
            _call(self.url + "/agent", None, 5.0, self.token)
        except RuntimeError as exc:  # it answered, and refused
            refusal = f"the receiver agent at {self.address} refused the run: {exc}"
            raise errors.SpecError(field, refusal) from None
        except (OSError, ValueError) as exc:
            raise errors.SpecError(
                field,
                f"no receiver agent answers at {self.address} ({exc}): start one on that host with "
                f"`tidal agent --listen {self.address}`, or remove it from the list",
            ) from None

    def refresh(self) -> None:
        """Ask the agent for its receivers (at most every ``_FRESH`` s; every 2 s once lost)."""
        with self._lock:
            now = time.monotonic()
            if now - self._asked_at <= (2.0 if self.lost else _FRESH):
                return
            self._asked_at = now
            try:
                listing = _call(self.url + "/agent", None, 1.0, self.token)
                self._codes = {int(p): c for p, c in listing["receivers"].items()}
                if self.lost:
                    log.warning("receiver host %s answers again: it takes receivers again", self.address)
                self._answered_at, self.lost = time.monotonic(), False
            except (OSError, ValueError, KeyError, RuntimeError):
                if not self.lost and time.monotonic() - self._answered_at > LOST_AFTER:
                    self.lost = True
                    log.warning("receiver host %s: no answer for %.0f s, lost", self.address, LOST_AFTER)

    def returncode(self, pid: int) -> int | None:
        self.refresh()
        with self._lock:
            if self.lost:
                return LOST_CODE
            return self._codes.get(pid, LOST_CODE)  # unknown: the agent restarted, its receivers with it

    def live(self) -> int:
        with self._lock:
            return sum(1 for code in self._codes.values() if code is None)

    def signal(self, pid: int, sig: int) -> None:
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # a lost host: nothing to signal
            _call(f"{self.url}/receivers/{pid}/signal", {"signal": int(sig)}, 2.0, self.token)

    def start(self, config: ReceiverConfig) -> Child:
        answer = _call(self.url + "/receivers", json.loads(config.to_json()), START_TIMEOUT + 5, self.token)
        proc = RemoteProcess(self, int(answer["pid"]))
        with self._lock:
            self._codes[proc.pid] = None
        return Child(proc, time.time(), port=int(answer["port"]), host=str(answer["host"]))


class RemoteProcess:
    """A receiver an agent runs: what :class:`~tidal.request.children.Process` asks, through it."""

    stdout: IO[str] | None = None

    def __init__(self, agent: AgentClient, pid: int) -> None:
        self.agent, self.pid = agent, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.agent.returncode(self.pid)
        return self.returncode

    def why(self) -> str:
        """Why it ended, for the run's events."""
        if self.agent.lost:
            return f"its host's agent {self.agent.address} has not answered for {LOST_AFTER:g} s: host lost"
        return f"exited with code {self.returncode} on {self.agent.address}"

    def send_signal(self, sig: int) -> None:
        self.agent.signal(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"receiver {self.pid} on {self.agent.address}", timeout or 0)
            time.sleep(0.2)
        return code


class AgentLauncher(Launcher):
    """Receivers on the agents' hosts: each new one where the fewest run, lost hosts skipped."""

    shares_port = False  # on other hosts: the activator stays in the path (docs/http.md)

    def __init__(self, addresses: list[str], token: str | None = None) -> None:
        self.agents = [AgentClient(a, token) for a in addresses]

    def check(self, field: str) -> None:
        for agent in self.agents:
            agent.check(field)

    def start(self, config: ReceiverConfig, count: int) -> list[Child]:
        for agent in self.agents:
            if agent.lost:  # nothing of its own polls a lost host: ask whether it is back
                agent.refresh()
        up = [a for a in self.agents if not a.lost]
        if not up:
            log.warning("http source %s: every receiver host is lost; none started", config.vertex)
            return []
        load = {a.address: a.live() for a in up}
        picks = []
        for _ in range(count):
            agent = min(up, key=lambda a: load[a.address])
            load[agent.address] += 1
            picks.append(agent)
        # The starts run at once; while they do, the agents they wait on are polled, and the starts
        # on a host called lost meanwhile are given up: a host cut off mid-start (inside a scale-up)
        # answers nothing, and its start would hold this scale-up, and the run's look at its
        # receivers, for the call's whole timeout (35 s, tidal bench chaos-receivers).
        pool = ThreadPoolExecutor(max_workers=min(8, count))
        calls = [(agent, pool.submit(_attempt, agent, config)) for agent in picks]
        pool.shutdown(wait=False)
        while not all(f.done() or a.lost for a, f in calls):
            wait([f for _, f in calls if not f.done()], timeout=_FRESH, return_when=FIRST_COMPLETED)
            for agent in {a for a, f in calls if not f.done()}:
                agent.refresh()
        started = []
        for agent, call in calls:
            if not call.done():  # its host lost: a receiver it starts after all is stopped
                call.add_done_callback(functools.partial(_stop_late, agent))
                outcome: Child | str = f"its host was lost while the receiver started ({agent.address})"
            else:
                outcome = call.result()
            if isinstance(outcome, Child):
                started.append(outcome)
            else:
                log.warning("http source %s: no receiver on %s: %s", config.vertex, agent.address, outcome)
        return started


def _stop_late(agent: AgentClient, call: Future[Child | str]) -> None:
    """A receiver started on a host given up for lost: nobody routes to it, so it goes."""
    outcome = call.result()
    if isinstance(outcome, Child):
        agent.signal(outcome.proc.pid, signal.SIGTERM)


def _attempt(agent: AgentClient, config: ReceiverConfig) -> Child | str:
    try:
        return agent.start(config)
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        return str(exc)


def exit_reason(proc: Process) -> str:
    """Why a receiver ended: its host lost, or its exit code."""
    if isinstance(proc, RemoteProcess):
        return proc.why()
    return f"exited with code {proc.poll()}"


def launcher_for(
    receiver_hosts: list[str], log_dir: Path, field: str = "receiverHosts", token: str | None = None
) -> Launcher:
    """The agents of ``receiver_hosts`` (each checked now: ``field`` names them in the error; each
    request with ``token``), or child processes when none."""
    if not receiver_hosts:
        return LocalLauncher(log_dir)
    launcher = AgentLauncher(receiver_hosts, token)
    launcher.check(field)
    return launcher
