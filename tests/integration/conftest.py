"""Integration fixtures: one SparkSession per test process (getOrCreate costs ~10 s).

``make test`` runs these tests in two pytest-xdist workers (``--dist loadgroup``). Most of them
wait more than they compute (a trigger, a JVM's start, an election), so two at a time use the
two cores the one-at-a-time run left idle. The modules in :data:`ONE_AT_A_TIME` run in one
worker, one after the other: they start standalone clusters and multi-host rigs, kill executors
found by name (``pgrep``), and each alone fills the box.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

ONE_AT_A_TIME = frozenset(
    {"test_cluster", "test_hosts", "test_receiver_hosts", "test_jetstream_replicas", "test_rig"}
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem in ONE_AT_A_TIME:
            item.add_marker(pytest.mark.xdist_group("hosts"))


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """Local mode, UI off, quiet logs, small shuffle partitions, bound to loopback; stopped at the end."""
    from tidal.spark.datasource import register
    from tidal.spark.session import build_session

    session = build_session("tidal-tests", "local[2]", shuffle_partitions=2)
    register(session)
    yield session
    session.stop()
