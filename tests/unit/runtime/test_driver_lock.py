"""One driver per run directory: a second holder is refused naming the first's PID, a crashed
holder frees the directory at once, and --reset will not delete a live run's state."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tidal.errors import RunDirectoryError
from tidal.spark.batch import rundir
from tidal.spark.batch.driver_lock import DriverLock


def test_a_second_driver_is_refused_naming_the_first_and_may_start_once_it_let_go(tmp_path):
    first = DriverLock(tmp_path / "run").acquire()
    with pytest.raises(RunDirectoryError, match=rf"another tidal run \(pid {os.getpid()}\) is running on it"):
        DriverLock(tmp_path / "run").acquire()
    first.release()
    DriverLock(tmp_path / "run").acquire().release()


def test_a_killed_driver_frees_its_directory_at_once(tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from tidal.spark.batch.driver_lock import DriverLock; "
            f"DriverLock({str(run)!r}).acquire(); print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirectoryError, match=rf"pid {holder.pid}"):
            DriverLock(run).acquire()
        with pytest.raises(RunDirectoryError):
            rundir.reset(run)  # --reset would delete a live run's state
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        DriverLock(run).acquire().release()  # no stale lock to clear by hand
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
