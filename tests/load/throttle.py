"""Run a command on a slower box: ``python tests/load/throttle.py --speed 50 -- CMD ...``.

``make test-under-load`` uses it to prove the suite does not depend on the box's speed (#54). A
fresh clone failed on a box that ran at about half the speed of the one the suite was tuned on,
and two busy CPU hogs beside the tests had not caught it: the hogs compete with the tests'
processes on the scheduler's terms, and with dozens of JVM and Python threads runnable, two hogs
take far less than half the box. So the slow box is made exact instead: the command and every
process it starts run in a Linux control group whose CPU bandwidth is ``speed`` percent of the
machine's cores (``cpu.max`` under cgroup v2, ``cpu.cfs_quota_us`` under v1). At ``--speed 50``
on two cores, everything the tests start shares one core's worth of CPU time, however many
threads they run: the same as a box at half speed, and the same on every box.

It needs root (or a delegated cgroup) and the ``cpu`` controller; without them it stops and says
so, and ``make test-under-load LOAD=hogs`` falls back to the two hogs (``tests/load/hogs.py``).
When the command ends, anything it left in the group is killed by PID and the group removed.
The command's exit code is this script's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


class ThrottleError(RuntimeError):
    """The box cannot be throttled here (no cgroup ``cpu`` controller we may write)."""


def cpu_group_parent() -> tuple[Path, int]:
    """Where to make the group, and the cgroup version: v2 where its ``cpu`` controller is on,
    else v1's ``cpu`` hierarchy."""
    v2 = CGROUP_ROOT / "cgroup.controllers"
    if v2.exists() and "cpu" in v2.read_text().split():
        return CGROUP_ROOT, 2
    if (CGROUP_ROOT / "cpu" / "cpu.cfs_quota_us").exists():
        return CGROUP_ROOT / "cpu", 1
    raise ThrottleError(
        "no cgroup cpu controller to throttle with (looked for /sys/fs/cgroup/cgroup.controllers "
        "with 'cpu', and /sys/fs/cgroup/cpu/cpu.cfs_quota_us); use: make test-under-load LOAD=hogs"
    )


def make_group(speed: int) -> tuple[Path, int]:
    """A new group allowed ``speed`` % of every core, with nothing in it yet."""
    parent, version = cpu_group_parent()
    group = parent / f"tidal-throttle-{os.getpid()}"
    quota = max(1000, PERIOD_US * (os.cpu_count() or 1) * speed // 100)
    try:
        group.mkdir()
        if version == 2:
            (group / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
        else:
            (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (group / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    except PermissionError as error:
        with contextlib.suppress(OSError):
            group.rmdir()
        raise ThrottleError(
            f"cannot create a cgroup at {group} ({error}): run as root, or: make test-under-load LOAD=hogs"
        ) from error
    return group, version


def members(group: Path) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
    return []


def remove_group(group: Path) -> None:
    """Kill what the command left behind (by PID, from the group's own list), then remove it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = members(group)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 10
        while members(group) and time.monotonic() < deadline:
            time.sleep(0.1)
    deadline = time.monotonic() + 10
    while True:
        try:
            group.rmdir()
            return
        except OSError:
            if time.monotonic() >= deadline:
                print(f"throttle: could not remove {group}", file=sys.stderr)
                return
            time.sleep(0.2)


def run(speed: int, command: list[str]) -> int:
    group, _ = make_group(speed)
    print(f"throttle: {command[0]} ... at {speed}% of {os.cpu_count()} cores (cgroup {group})", flush=True)
    parent = group.parent
    # This process joins the group before it starts the command, so the command and everything it
    # starts are in it; it leaves again before it cleans up (a group with a member cannot go).
    (group / "cgroup.procs").write_text(f"{os.getpid()}\n")
    try:
        child = subprocess.Popen(command)
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)
            return child.wait()
    finally:
        (parent / "cgroup.procs").write_text(f"{os.getpid()}\n")
        remove_group(group)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", type=int, default=50, help="percent of the box's CPU (1-100)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    if not 1 <= args.speed <= 100:
        parser.error(f"--speed must be 1-100 (percent of the box), got {args.speed}")
    try:
        return run(args.speed, command)
    except ThrottleError as error:
        print(f"throttle: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
