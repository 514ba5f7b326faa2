"""Tidal's PySpark daemon imports, before it forks, only what starts no thread.

A forked child gets none of its parent's threads: a pool numpy or pyarrow started in the daemon
would be missing, and any lock it held would stay held, in every worker forked from it. So the
daemon's imports must leave the process with one thread and without numpy, pyarrow or pandas,
measured as Spark starts it: PySpark's zip first on the path (``tidal.spark.cluster.pyzip``).
"""

from __future__ import annotations

import os
import subprocess
import sys

from tidal.spark.cluster.pyzip import spark_python_zips

PROBE = """
import os, sys
import tidal.spark.query.daemon
heavy = [m for m in ("numpy", "pyarrow", "pandas", "pydantic") if m in sys.modules]
print(len(os.listdir(f"/proc/{os.getpid()}/task")), ",".join(heavy), sys.modules["pyspark"].__file__, sep="|")
"""


def test_the_daemon_imports_pyspark_and_tidal_before_forking_and_starts_no_thread() -> None:
    zips = [str(z) for z in spark_python_zips()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*zips, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True, env=env
    ).stdout.strip()
    threads, heavy, pyspark = out.split("|")
    assert threads == "1", f"the daemon's imports started {int(threads) - 1} thread(s)"
    assert heavy == "", f"the daemon imported {heavy}: it must import them after the fork"
    assert "pyspark.zip" in pyspark, pyspark  # imported as the workers import it
