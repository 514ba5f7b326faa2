"""The class-data archive's options: used only when built for this JDK and Spark, off on request,
and for executors only where the workers share this machine's Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidal.spark.cluster import cds


def test_no_archive_no_options(tmp_path: Path) -> None:
    assert cds.driver_options(tmp_path) == ""
    assert cds.executor_options("spark://127.0.0.1:7077", tmp_path) == ""


def test_an_archive_for_this_jdk_and_spark_is_mapped(tmp_path: Path) -> None:
    path = cds.archive_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    assert cds.driver_options(tmp_path) == f"-XX:SharedArchiveFile={path} {cds.QUIET}"
    assert cds.executor_options("spark://127.0.0.1:7077", tmp_path) == cds.driver_options(tmp_path)
    assert cds.executor_options("spark://localhost:7077", tmp_path) != ""
    # A worker on another host has its own Spark (and no such file).
    assert cds.executor_options("spark://10.0.0.5:7077", tmp_path) == ""


def test_an_archive_of_another_spark_is_not_used(tmp_path: Path) -> None:
    stale = tmp_path / "spark-3.5.0-000000000000.jsa"
    stale.write_bytes(b"x")
    assert cds.archive_path(tmp_path) != stale
    assert cds.driver_options(tmp_path) == ""


def test_tidal_cds_0_turns_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = cds.archive_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    monkeypatch.setenv("TIDAL_CDS", "0")
    assert cds.driver_options(tmp_path) == ""


def test_the_key_names_the_spark_version() -> None:
    import pyspark

    assert cds.key().startswith(f"{pyspark.__version__}-")
    assert cds.archive_path().name == f"spark-{cds.key()}.jsa"
