"""New executors warmed as they register (:mod:`tidal.spark.cluster.warm`), on a real
standalone cluster on 127.0.0.1: the warm-up starts each executor's Python daemon before any
task of the pipeline's, and the next Python tasks there run in workers of that daemon."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tidal.spark.cluster.standalone import StandaloneCluster

pytestmark = pytest.mark.spark


def test_registered_executors_get_their_python_daemon_before_the_first_task(tmp_path: Path) -> None:
    with StandaloneCluster(tmp_path / "cluster", workers=2, cores=1) as cluster:
        assert cluster.info is not None
        workers = ",".join(str(p) for p in cluster.info.pids[1:])  # the master first
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("warm_check.py")), cluster.info.master, workers],
            check=False, capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL,
            cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["modules"] == ["tidal.examples.udfs"]
    assert seen["before"] == [], seen  # registered, and no Python process on them yet
    assert len(seen["warmed"]) == 2 and seen["reported"] == seen["warmed"], seen  # one per executor
    # A SQL job after it (a vertex's kind) ran in workers of the warmed daemons.
    assert set(seen["ran_in"]) <= set(seen["warmed"]), seen
    # An RDD job's daemons are others (Spark keys a daemon by the job's artifact session too):
    # a warm-up run as an RDD job warmed daemons no vertex used (seen on the cluster, 2026-12-07).
    assert not set(seen["rdd_in"]) & set(seen["warmed"]), seen
    assert set(seen["after"]) == set(seen["warmed"]) | set(seen["rdd_in"]), seen
