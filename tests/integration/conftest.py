"""Integration fixtures: one SparkSession per test process (getOrCreate costs ~10 s).

``make test`` runs these tests in two pytest-xdist workers (``--dist loadgroup``). Most of them
wait more than they compute (a trigger, a JVM's start, an election), so two at a time use the
two cores the one-at-a-time run left idle. The modules in :data:`ONE_AT_A_TIME` run in one
worker, one after the other: they start standalone clusters and multi-host rigs, kill executors
found by name (``pgrep``), and each alone fills the box.

Every driver, master and worker JVM the tests start compiles with C1 only (:data:`QUICK_JIT`):
a test's JVM lives seconds to a minute on a handful of messages, so C2's compiler threads only
take CPU from the other worker's tests. What the tests check does not depend on the JIT; a
Tidal run outside the tests keeps the JVM's default (C2's code is what a long-running
pipeline's throughput needs).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Read by Spark's launcher for what it starts: drivers (``spark-submit``, a PySpark session's
# own JVM included) and standalone masters and workers. Executors keep the default: a worker
# launches them with the application's own Java options, not from its environment.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
for _variable in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    os.environ.setdefault(_variable, QUICK_JIT)

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
    from tidal.spark.cluster.session import build_session
    from tidal.spark.query.datasource import register

    session = build_session("tidal-tests", "local[2]", shuffle_partitions=2)
    register(session)
    yield session
    session.stop()
