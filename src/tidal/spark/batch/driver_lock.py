"""One driver per run directory: a second ``tidal run`` on a directory a live run holds is refused.

Two drivers on one run directory would both plan micro-batches over the same buffers and
checkpoints, and both commit: messages delivered twice, offsets fought over. So the driver holds
``flock(LOCK_EX)`` on ``<run_dir>/driver.lock`` for the life of its run. The kernel lets go of it
when the process ends, however it ends (Ctrl-C, SIGKILL, the machine going down), so a crashed
run's directory is free at once for its resume, with no stale lock to clear by hand. The holder's
PID is written in the file, for the refusal's message.

On a file system that does not lock (some FUSE and network mounts answer ``flock`` with an error)
the run goes on unlocked, with a warning saying so.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from pathlib import Path

from tidal import errors

__all__ = ["LOCK_FILE", "DriverLock"]

LOCK_FILE = "driver.lock"
log = logging.getLogger("tidal.run")


class DriverLock:
    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> DriverLock:
        """Hold the run directory, or raise :class:`~tidal.errors.RunDirectoryError` naming the
        run that holds it."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise errors.RunDirectoryError(
                    str(self.run_dir),
                    f"another tidal run{f' (pid {holder})' if holder else ''} is running on it: two "
                    "drivers on one run directory would deliver messages twice",
                    "stop that run first (Ctrl-C, or SIGTERM to its pid), or give this one another --run-dir",
                ) from None
            log.warning("cannot lock %s (%s): running without the one-driver lock", self.path, exc)
            return self
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def _holder(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode(errors="replace").strip()
    except OSError:
        return ""
