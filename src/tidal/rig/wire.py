"""A host's link with a delay and a loss rate, in userspace: ``tc netem`` without the kernel's.

This machine's kernel is built without ``sch_netem`` (``CONFIG_NET_SCH_NETEM`` is not set), so
``tc qdisc add … netem`` says "Specified qdisc kind is unknown". Instead of a veth pair, an
impaired host gets two TAP devices: ``eth0`` in its namespace and one on the rig's bridge. This
process holds both and copies every Ethernet frame from one to the other, as a cable would:

- **delay**: each frame the host *sends* waits ``delay`` seconds (what ``netem delay`` on the
  host's interface does: a round trip to the host takes ``delay`` longer);
- **loss**: each frame, either way, is dropped with probability ``loss`` (a bad link; TCP
  retransmits, UDP loses).

Frames keep their order (one timer per frame, all with the same delay). The TAP devices are not
persistent: when this process ends, both vanish, and the host is cut off. It prints ``READY``
once both exist, so the rig can give them addresses.

``python -m tidal.rig.wire --outside NAME --netns NS [--delay S] [--loss P] [--seed N]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import fcntl
import os
import random
import signal
import struct
import sys

__all__ = ["main", "open_tap"]

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
FRAME = 65536


def open_tap(name: str) -> int:
    """A new TAP device ``name`` in this process's network namespace, as a non-blocking fd."""
    fd = os.open("/dev/net/tun", os.O_RDWR)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), IFF_TAP | IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    os.set_blocking(fd, False)
    return fd


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({path})")
    finally:
        os.close(fd)


def open_pair(outside: str, netns: str) -> tuple[int, int]:
    """The bridge-side TAP ``outside`` here, then ``eth0`` inside ``netns``; this process goes
    back to its own namespace after, so a host's own processes never include its wire."""
    home = f"/proc/{os.getpid()}/ns/net"
    home_fd = os.open(home, os.O_RDONLY)
    try:
        out_fd = open_tap(outside)
        _setns(f"/var/run/netns/{netns}")
        try:
            in_fd = open_tap("eth0")
        finally:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(home_fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns(home)")
    finally:
        os.close(home_fd)
    return out_fd, in_fd


class Cable:
    """Copies frames between the host's side and the bridge's side, delaying and dropping."""

    def __init__(self, host_fd: int, bridge_fd: int, delay: float, loss: float, seed: int | None) -> None:
        self.host_fd, self.bridge_fd = host_fd, bridge_fd
        self.delay, self.loss = delay, loss
        self.random = random.Random(seed)
        self.loop = asyncio.get_running_loop()
        self.dropped = self.passed = 0

    def start(self) -> None:
        self.loop.add_reader(self.host_fd, self._copy, self.host_fd, self.bridge_fd, self.delay)
        self.loop.add_reader(self.bridge_fd, self._copy, self.bridge_fd, self.host_fd, 0.0)

    def _copy(self, src: int, dst: int, delay: float) -> None:
        while True:
            try:
                frame = os.read(src, FRAME)
            except BlockingIOError:
                return
            except OSError:  # the device went down: nothing to read now
                return
            if self.loss and self.random.random() < self.loss:
                self.dropped += 1
                continue
            self.passed += 1
            if delay > 0:
                self.loop.call_later(delay, _write, dst, frame)
            else:
                _write(dst, frame)


def _write(fd: int, frame: bytes) -> None:
    with contextlib.suppress(OSError):  # a link set down, a full queue: lost, as on a real wire
        os.write(fd, frame)


async def _serve(args: argparse.Namespace) -> None:
    bridge_fd, host_fd = open_pair(args.outside, args.netns)
    cable = Cable(host_fd, bridge_fd, args.delay, args.loss, args.seed)
    cable.start()
    print("READY", flush=True)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    await stopped.wait()
    print(f"frames passed {cable.passed}, dropped {cable.dropped}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tidal.rig.wire", description=__doc__.splitlines()[0])
    parser.add_argument("--outside", required=True, help="the bridge-side TAP device's name")
    parser.add_argument("--netns", required=True, help="the host's network namespace (eth0 there)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds added to each frame the host sends")
    parser.add_argument("--loss", type=float, default=0.0, help="probability of dropping each frame")
    parser.add_argument("--seed", type=int, default=None, help="for a repeatable loss pattern")
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
