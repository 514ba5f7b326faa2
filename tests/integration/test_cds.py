"""A Spark session maps the class-data archive that `make` builds into the virtualenv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tidal.spark.cluster import cds

SESSION = """
from tidal.spark.cluster.session import build_session
spark = build_session("tidal-cds-test", "local[1]")
assert spark.range(10).count() == 10
"""


def test_the_driver_maps_the_archive(tmp_path: Path) -> None:
    archive = cds.archive_path()
    fix = "`make cds` (python -m tidal.spark.cluster.cds) builds it"
    assert archive.is_file(), f"no class-data archive at {archive}: {fix}"
    log = tmp_path / "class-load.log"
    env = {**os.environ, "JDK_JAVA_OPTIONS": f"-Xlog:class+load=info:file={log}"}
    env.pop("TIDAL_CDS", None)
    proc = subprocess.run(
        [sys.executable, "-c", SESSION], env=env, capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = log.read_text().splitlines()
    shared = sum("source: shared objects file (top)" in line for line in lines)  # the dynamic archive
    # Spark's own classes come from it: thousands, not a few.
    assert shared > 5000, f"{shared} of {len(lines)} classes from the archive"
    assert any("org.apache.spark.SparkContext " in line and "(top)" in line for line in lines)
