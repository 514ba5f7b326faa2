"""Hosts as Linux network namespaces on a private bridge: ``with Rig(["driver", "w1"]) as rig``.

Each host gets a namespace (``tidal-<tag>-<name>``), its loopback, and an ``eth0`` with its own
address in a /24 of 10.0.0.0/8 that no interface on the machine uses yet. The bridge has no
address in the machine's own namespace, so the hosts reach each other and nothing else: a test
talks to a service by running its client on a host (:meth:`Host.popen`), and shares files
through the filesystem, which namespaces do not separate.

What a test does to a host:

- :meth:`Host.kill` SIGKILLs every process in its namespace: the host is lost;
- :meth:`Host.link` sets its ``eth0`` down (a pulled cable) or up again;
- an :class:`Impairment` given at start puts a userspace wire (:mod:`tidal.rig.wire`) in
  place of its veth pair: a delay on what it sends, a loss rate both ways.

:meth:`Rig.stop` kills what runs in each namespace and every wire by PID, then deletes the
namespaces, the links and the bridge: nothing is left behind, also after a failed start.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidal import errors

__all__ = ["Host", "Impairment", "Rig", "unavailable"]

_COUNTER = itertools.count()


@dataclass(frozen=True)
class Impairment:
    """What a host's link does to its frames: ``delay`` seconds on each frame it sends (as
    ``tc netem delay``), ``loss`` the probability of dropping each frame, either way."""

    delay: float = 0.0
    loss: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.delay <= 10.0:
            raise ValueError(f"Impairment.delay is {self.delay}: give seconds between 0 and 10")
        if not 0.0 <= self.loss < 1.0:
            raise ValueError(f"Impairment.loss is {self.loss}: give a probability in [0, 1)")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False, timeout=30)
    if check and done.returncode != 0:
        raise errors.TidalError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why this machine cannot run a rig (not root, no iproute2, namespaces not allowed), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's ip is missing: sudo apt-get install -y iproute2"
    probe = f"tidal-probe-{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"this machine does not allow network namespaces: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.0.0.0/8 that no address on this machine is in (the rig's bridge is private)."""
    used = [
        ipaddress.ip_interface(a).network
        for a in re.findall(r"inet (\S+)", _ip("-o", "-4", "addr", "show").stdout)
    ]
    start = (os.getpid() * 7 + next(_COUNTER)) % 250
    for step in range(250 * 250):
        second, third = 1 + (start + step // 250) % 250, (start + step) % 250
        net = ipaddress.IPv4Network(f"10.{second}.{third}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise errors.TidalError("no free /24 in 10.0.0.0/8 for the rig's bridge")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # gone already
        return ""


class Host:
    """One host of a :class:`Rig`: its namespace, its address, the processes started on it."""

    def __init__(self, rig: Rig, name: str, index: int, address: str) -> None:
        self.rig, self.name, self.index, self.address = rig, name, index, address
        self.netns = f"tidal-{rig.tag}-{name}"
        self.procs: list[subprocess.Popen[Any]] = []

    def __repr__(self) -> str:
        return f"Host({self.name!r}, {self.address})"

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run in this host's network namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` on this host (its own session: a Ctrl-C reaches the test, not it)."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(self.command(argv), start_new_session=True, **kw)
        self.procs.append(proc)
        return proc

    def run(self, argv: Sequence[str], timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on this host to its end; its output as text."""
        return subprocess.run(
            self.command(argv), capture_output=True, text=True, check=False, timeout=timeout, **kw
        )

    def pids(self) -> list[int]:
        """Every process in this host's namespace, whoever started it."""
        done = _ip("netns", "pids", self.netns, check=False)
        return [int(p) for p in done.stdout.split()]

    def kill(self, only: str | None = None) -> list[int]:
        """The host is lost: SIGKILL every process on it, at once; with ``only``, just those whose
        command line contains it (``only="nats-server"``: one server lost, the host kept).
        Returns their PIDs."""
        pids = [p for p in self.pids() if only is None or only in _cmdline(p)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in self.procs:
            if only is None or proc.pid in pids or only in str(proc.args):
                with contextlib.suppress(Exception):
                    proc.wait(timeout=10)
        return pids

    def link(self, up: bool) -> None:
        """Its ``eth0`` down (a pulled cable: it keeps running, nobody reaches it) or up again."""
        _ip("-n", self.netns, "link", "set", "eth0", "up" if up else "down")


class Rig:
    """``Rig(["driver", "w1", "w2"], impaired={"w2": Impairment(delay=0.2)}).start()`` … ``stop()``."""

    def __init__(self, names: Sequence[str], *, impaired: Mapping[str, Impairment] | None = None) -> None:
        if len(set(names)) != len(names) or not names:
            raise ValueError(f"a rig needs distinct host names, got {list(names)}")
        bad = [n for n in names if not re.fullmatch(r"[a-z][a-z0-9]{0,11}", n)]
        if bad:
            raise ValueError(f"host names are 1-12 lower-case letters and digits: {bad}")
        unknown = set(impaired or {}) - set(names)
        if unknown:
            raise ValueError(f"impaired names hosts the rig does not have: {sorted(unknown)}")
        self.names = list(names)
        self.impaired = dict(impaired or {})
        self.tag = f"{os.getpid() % 100000:05d}{next(_COUNTER) % 100:02d}"
        self.bridge = f"tb{self.tag}"
        self.hosts: dict[str, Host] = {}
        self.subnet: ipaddress.IPv4Network | None = None
        self._wires: list[subprocess.Popen[str]] = []

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def start(self) -> Rig:
        reason = unavailable()
        if reason is not None:
            raise errors.TidalError(f"cannot start a rig of hosts: {reason}")
        try:
            self.subnet = _free_subnet()
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("link", "set", self.bridge, "up")
            addresses = self.subnet.hosts()
            for index, name in enumerate(self.names):
                host = Host(self, name, index, str(next(addresses)))
                self.hosts[name] = host
                _ip("netns", "add", host.netns)
                _ip("-n", host.netns, "link", "set", "lo", "up")
                outside = f"tv{self.tag}{index}"
                if name in self.impaired:
                    self._wire(host, outside, self.impaired[name])
                else:
                    _ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
                _ip("link", "set", outside, "master", self.bridge, "up")
                _ip("-n", host.netns, "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", "eth0")
                _ip("-n", host.netns, "link", "set", "eth0", "up")
        except BaseException:
            self.stop()
            raise
        return self

    def _wire(self, host: Host, outside: str, impairment: Impairment) -> None:
        wire = subprocess.Popen(
            [sys.executable, "-m", "tidal.rig.wire", "--outside", outside, "--netns", host.netns,
             "--delay", str(impairment.delay), "--loss", str(impairment.loss)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            start_new_session=True,
        )  # fmt: skip
        self._wires.append(wire)
        assert wire.stdout is not None
        line = wire.stdout.readline()  # READY, or nothing when it failed
        if line.strip() != "READY":
            wire.kill()
            _, err = wire.communicate(timeout=10)
            raise errors.TidalError(f"the wire of host {host.name} did not start: {err.strip()[-500:]}")

    def stop(self) -> None:
        """Everything on every host (each kill waits for the processes it started), then the
        wires, by PID; then namespaces, links and bridge."""
        for host in self.hosts.values():
            host.kill()
        for wire in self._wires:
            if wire.poll() is None:
                wire.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                wire.communicate(timeout=10)
            if wire.poll() is None:
                wire.kill()
                wire.wait(timeout=10)
        self._wires = []
        for host in self.hosts.values():
            _ip("netns", "del", host.netns, check=False)
            _ip("link", "del", f"tv{self.tag}{host.index}", check=False)
        _ip("link", "del", self.bridge, check=False)

    def __enter__(self) -> Rig:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
