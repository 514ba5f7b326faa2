"""Which Python Spark's own Python processes run: this one, the venv's."""

from __future__ import annotations

import os
import sys

__all__ = ["spark_python"]


def spark_python() -> str:
    """This interpreter, for every Python process Spark starts (task workers, the driver's
    data-source runners), and loopback for the driver unless ``SPARK_LOCAL_IP`` says otherwise:
    set in the environment where the caller did not. Without it, a session made outside ``make``
    ran those processes on the system's python (no pyarrow there: the query failed)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return sys.executable
