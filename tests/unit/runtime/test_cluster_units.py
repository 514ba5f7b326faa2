"""Cluster set-up that fails before Spark starts: each error names the field and the fix."""

from __future__ import annotations

import socket

import pytest

from tidal import errors
from tidal.spark.cluster.session import check_master, cluster_conf
from tidal.spark.cluster.standalone import parse_cluster
from tidal.spec import parse_pipeline

BASE = {
    "name": "p",
    "vertices": [{"name": "in", "source": {"generator": {"rate": 1}}}, {"name": "out", "sink": {"log": {}}}],
    "edges": [{"from": "in", "to": "out"}],
}


def test_spark_dynamic_allocation_is_refused_with_the_reason_and_the_fix():
    with pytest.raises(errors.SpecError) as caught:
        parse_pipeline({**BASE, "cluster": {"conf": {"spark.dynamicAllocation.enabled": "true"}}})
    text = str(caught.value)
    assert "cluster.conf" in text and "ignore Tidal's executor requests" in text and "remove it" in text


def test_min_executors_above_max_is_refused():
    with pytest.raises(errors.SpecError, match="minExecutors 5 is above maxExecutors 2"):
        parse_pipeline({**BASE, "cluster": {"minExecutors": 5, "maxExecutors": 2}})


def test_a_master_that_is_not_spark_url_is_refused():
    with pytest.raises(errors.SpecError, match=r"cluster\.master"):
        parse_pipeline({**BASE, "cluster": {"master": "yarn"}})


def test_the_session_starts_at_min_executors_and_gets_the_executor_size():
    # Spark's dynamic allocation is on only so that the master starts the application at
    # minExecutors, not at spark.cores.max; take_over_executors stops its manager at once.
    cluster = {"executorCores": 2, "minExecutors": 1, "maxExecutors": 3, "executorMemory": "2g"}
    spec = parse_pipeline({**BASE, "cluster": cluster})
    conf = cluster_conf(spec.cluster)
    assert conf["spark.dynamicAllocation.enabled"] == "true"
    first = conf["spark.dynamicAllocation.initialExecutors"]
    assert first == conf["spark.dynamicAllocation.minExecutors"] == "1"
    assert conf["spark.executor.cores"] == "2" and conf["spark.executor.memory"] == "2g"
    assert conf["spark.cores.max"] == "6"


def test_a_killed_executor_is_dropped_from_the_count_after_a_second_unless_the_user_says_otherwise():
    # Spark's 5 s default kept every executor the allocator killed listed (and counted in the
    # executor log) 4.2 s after its JVM had exited; a spec's own conf still wins.
    key = "spark.standalone.executorRemoveDelayOnDisconnection"
    assert cluster_conf(parse_pipeline(BASE).cluster)[key] == "1s"
    own = parse_pipeline({**BASE, "cluster": {"conf": {key: "5s"}}})
    assert cluster_conf(own.cluster)[key] == "5s"


def test_an_unreachable_master_is_refused_at_once_with_the_fix():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(errors.ClusterError) as caught:
        check_master(f"spark://127.0.0.1:{port}", timeout=1)
    text = str(caught.value)
    assert f"spark://127.0.0.1:{port}" in text and "tidal cluster up" in text and "--master" in text


@pytest.mark.parametrize(("text", "expected"), [("local:3", (3, 2)), ("local:2x4", (2, 4))])
def test_cluster_shorthand(text, expected):
    assert parse_cluster(text) == expected


@pytest.mark.parametrize("text", ["local", "local:0", "yarn:2", "local:2x0"])
def test_a_bad_cluster_shorthand_names_the_option(text):
    with pytest.raises(errors.SpecError, match="--cluster"):
        parse_cluster(text)


def _state(*cores: int, dead: int = 0, memory: int | None = None) -> dict:
    alive = [{"state": "ALIVE", "cores": c, **({"memory": memory} if memory else {})} for c in cores]
    return {"workers": alive + [{"state": "DEAD", "cores": 64}] * dead}


def test_a_cluster_that_can_hold_the_executors_passes():
    from tidal.spark.cluster.standalone import capacity_problem

    spec = parse_pipeline({**BASE, "cluster": {"executorCores": 2, "minExecutors": 2, "maxExecutors": 4}})
    assert capacity_problem(_state(2, 2), spec.cluster) is None
    assert capacity_problem(_state(4), spec.cluster) is None  # two executors on one 4-core worker


def test_executors_bigger_than_every_worker_are_named_with_the_fix():
    from tidal.spark.cluster.standalone import capacity_problem

    spec = parse_pipeline({**BASE, "cluster": {"executorCores": 4, "maxExecutors": 2}})
    problem = capacity_problem(_state(2, 3, dead=1), spec.cluster)  # a dead 64-core worker counts not
    assert problem is not None
    assert "executorCores is 4 but the largest alive worker has 3 cores" in problem
    assert "lower executorCores to 3" in problem


def test_min_executors_beyond_the_workers_room_and_no_worker_at_all():
    from tidal.spark.cluster.standalone import capacity_problem

    spec = parse_pipeline({**BASE, "cluster": {"executorCores": 2, "minExecutors": 3, "maxExecutors": 4}})
    problem = capacity_problem(_state(2, 3), spec.cluster)  # 1 + 1: a 3-core worker holds one
    assert problem == (
        "cluster.minExecutors is 3 but 2 alive workers have room for 2 executors of 2 cores and 1g: "
        "lower minExecutors to 2 or add workers"
    )
    assert "no alive worker" in (capacity_problem(_state(dead=2), spec.cluster) or "")


def test_executor_memory_beyond_every_worker_is_named_with_the_fix_and_memory_bounds_the_room():
    from tidal.spark.cluster.standalone import capacity_problem, memory_mb

    assert (memory_mb("512m"), memory_mb("2g"), memory_mb("1024"), memory_mb("2048k")) == (512, 2048, 1024, 2)
    cluster = {"executorCores": 1, "executorMemory": "16g", "maxExecutors": 2}
    big = parse_pipeline({**BASE, "cluster": cluster})
    problem = capacity_problem(_state(2, 2, memory=2048), big.cluster)
    assert problem is not None and "executorMemory is 16g (16384 MB)" in problem, problem
    assert "offers 2048 MB" in problem and "lower executorMemory to 2048m" in problem, problem
    # Two 1-core executors of 1g fit a 2-core worker's cores but only one fits its 1.5 GB.
    spec = parse_pipeline({**BASE, "cluster": {"executorCores": 1, "minExecutors": 2, "maxExecutors": 4}})
    assert capacity_problem(_state(2, memory=2048), spec.cluster) is None
    assert "room for 1 executor of 1 core" in (capacity_problem(_state(2, memory=1536), spec.cluster) or "")
