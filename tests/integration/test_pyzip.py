"""Spark's Python workers import PySpark from the bytecode that `make` adds to its zip, and are
forked from Tidal's daemon, which imported it before the fork (tidal.spark.query.daemon)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tidal.spark.cluster.pyzip import has_bytecode, spark_python_zips


def test_a_task_imports_pyspark_from_the_zips_bytecode_in_a_worker_of_tidals_daemon(spark: Any) -> None:
    zips = spark_python_zips()
    fix = "`make pyc` (python -m tidal.spark.cluster.pyzip) compiles them"
    assert zips and all(has_bytecode(z) for z in zips), f"no bytecode in {zips}: {fix}"

    def where_pyspark_comes_from(batches: Iterator[Any]) -> Iterator[Any]:  # by value, to the worker
        import sys

        import pyarrow as pa
        import pyspark

        daemon = getattr(sys.modules["__main__"].__spec__, "name", "")  # the module run with -m
        for _ in batches:
            yield pa.RecordBatch.from_pydict({"file": [pyspark.__file__], "daemon": [daemon]})

    rows = spark.range(1).mapInArrow(where_pyspark_comes_from, "file string, daemon string").collect()
    # Spark puts the zip first on the worker's path; the module comes from its bytecode.
    assert [row.file for row in rows] == [f"{zips[0].parent}/pyspark.zip/pyspark/__init__.pyc"]
    # The worker was forked from Tidal's daemon (spark.python.daemon.module), not PySpark's.
    assert [row.daemon for row in rows] == ["tidal.spark.query.daemon"]
