"""CPU hogs for ``make test-under-load``: N processes that spin until told to stop.

``python tests/load/hogs.py start N PIDFILE`` starts N busy processes (each its own session, so a
Ctrl-C to make does not reach them) and writes their PIDs to PIDFILE; ``python tests/load/hogs.py
stop PIDFILE`` stops exactly those PIDs. Each hog also stops by itself after ``--max-seconds``
(default two hours), so a hog is never left running for long even if the stop is missed.
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

SPIN = (
    "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"
)


def start(count: int, pidfile: Path, max_seconds: float) -> None:
    pids = [
        subprocess.Popen(
            [sys.executable, "-c", SPIN, str(max_seconds)],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ).pid
        for _ in range(count)
    ]
    pidfile.write_text("\n".join(str(p) for p in pids) + "\n")
    print(f"started {count} CPU hogs: {' '.join(map(str, pids))}")


def stop(pidfile: Path) -> None:
    if not pidfile.exists():
        return
    pids = [int(line) for line in pidfile.read_text().split()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 10
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    pidfile.unlink()
    print(f"stopped CPU hogs: {' '.join(map(str, pids))}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    on = sub.add_parser("start")
    on.add_argument("count", type=int)
    on.add_argument("pidfile", type=Path)
    on.add_argument("--max-seconds", type=float, default=7200.0)
    off = sub.add_parser("stop")
    off.add_argument("pidfile", type=Path)
    args = parser.parse_args(argv)
    if args.command == "start":
        start(args.count, args.pidfile, args.max_seconds)
    else:
        stop(args.pidfile)


if __name__ == "__main__":
    main()
