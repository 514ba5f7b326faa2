"""Shared fixtures: servers on free loopback ports stopped by PID, one SparkSession per run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Spark's Python workers must use this interpreter and nothing may listen beyond loopback.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real nats-server with JetStream on a free loopback port, stopped by PID at the end."""
    from tidal.isb.natsd import NatsServer

    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    try:
        yield server
    finally:
        server.stop()
        assert server.proc is None


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path
