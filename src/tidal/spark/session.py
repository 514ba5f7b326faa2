"""The SparkSession Tidal needs: local by default, loopback only, FAIR pools, quiet logs."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

__all__ = ["build_session"]


def build_session(
    app_name: str = "tidal",
    master: str = "local[2]",
    *,
    ui: bool = False,
    shuffle_partitions: int = 2,
    log_level: str = "ERROR",
    extra: dict[str, str] | None = None,
) -> SparkSession:
    """Create (or reuse) the session. Executors run this interpreter, so they see the venv.

    Nothing listens beyond 127.0.0.1 unless the caller asks: the UI is off by default and the
    driver binds to loopback.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.scheduler.mode", "FAIR")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
    )
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
