"""Integration fixtures: one SparkSession for the whole run (getOrCreate costs ~10 s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """Local mode, UI off, quiet logs, small shuffle partitions, bound to loopback; stopped at the end."""
    from tidal.spark.datasource import register
    from tidal.spark.session import build_session

    session = build_session("tidal-tests", "local[2]", shuffle_partitions=2)
    register(session)
    yield session
    session.stop()
