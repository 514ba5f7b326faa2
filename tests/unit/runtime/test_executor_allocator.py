"""The allocator loop against a small fake cluster manager (the real one: integration/test_cluster.py)."""

from __future__ import annotations

import json

from tidal.errors import ClusterError
from tidal.scaling.executors import Executor, ExecutorBounds
from tidal.spark.cluster.executors import ExecutorAllocator, read_executor_log


class FakeCluster:
    """Registers a requested executor when ``arrive()`` is called; kills at once."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.executors: dict[str, Executor] = {}
        self.target = 0
        self.requests: list[int] = []
        self.kills: list[list[str]] = []
        self.host = host
        self.reasons: dict[str, str] = {}
        self.running: set[str] = set()  # given a task, as the scheduler knows before the listing
        self._next = 0

    def registered(self) -> list[Executor]:
        return list(self.executors.values())

    def request_total(self, n: int) -> bool:
        self.requests.append(n)
        self.target = n
        return True

    def kill(self, ids: list[str], *, force: bool) -> list[str]:
        """As Spark's scheduler: unforced, an executor running a task (``running``, which the
        listing may not show yet) is not killed."""
        self.kills.append(ids)
        killed = [i for i in ids if i in self.executors and (force or i not in self.running)]
        for i in killed:
            self.executors.pop(i)
        return killed

    def arrive(self, at: float) -> None:
        while len(self.executors) < self.target:
            self._next += 1
            self.executors[str(self._next)] = Executor(str(self._next), self.host, 2, added_at=at)

    def removed(self) -> dict[str, str]:
        return dict(self.reasons)

    def lose(self, id_: str, reason: str) -> None:
        """The executor's host died: gone from the list, with Spark's reason."""
        del self.executors[id_]
        self.reasons[id_] = reason

    def work(self, id_: str, completed: int = 1, active: int = 0) -> None:
        e = self.executors[id_]
        self.executors[id_] = Executor(e.id, e.host, e.cores, active, completed, e.added_at)


def test_executors_follow_replicas_and_every_step_is_logged_with_its_reason(tmp_path):
    cluster, wanted = FakeCluster(), {"a": 1, "b": 1}
    now = [100.0]
    bounds = ExecutorBounds(cores=2, min=1, max=4)
    alloc = ExecutorAllocator(cluster, bounds, lambda: wanted, tmp_path / "x.jsonl", clock=lambda: now[0])
    alloc.requested = 1
    cluster.request_total(1)
    cluster.arrive(100.0)
    wanted = {"a": 3, "b": 4}  # 7 replicas → 4 executors
    d = alloc.tick(101.0)
    assert str(d.rule) == "grow" and cluster.target == 4
    assert alloc.ready() == {"a": 1, "b": 1}  # two cores registered
    cluster.arrive(111.0)
    cluster.work("2")
    alloc.tick(112.0)
    assert alloc.ready() == wanted
    wanted = {"a": 2, "b": 1}  # 3 replicas → 2 executors: kill two of the idle 1, 2, 4, newest first
    cluster.work("3", completed=0, active=1)  # its first task still runs
    d = alloc.tick(120.0)
    assert str(d.rule) == "shrink" and set(d.kill) == {"4", "2"}  # not busy 3, not the oldest, 1
    alloc.tick(121.0)  # the kills are seen at the next look
    log = read_executor_log(tmp_path / "x.jsonl")
    assert [r["rule"] for r in log["decision"]] == ["grow", "steady", "shrink", "steady"]
    (startup,) = log["startup"]
    assert (
        startup["id"] == "2" and startup["registered_after"] == 10.0 and startup["first_task_after"] == 11.0
    )
    assert [c["executors"] for c in log["count"]] == [1, 4, 2]
    assert log["lost"] == [] and alloc.lost == 0  # what it killed itself was not lost


def test_an_executor_gone_without_a_kill_is_recorded_lost_with_sparks_reason_and_replaced(tmp_path):
    cluster, wanted = FakeCluster(host="10.1.2.3"), {"a": 4}
    bounds = ExecutorBounds(cores=2, min=1, max=4)
    alloc = ExecutorAllocator(cluster, bounds, lambda: wanted, tmp_path / "x.jsonl", clock=lambda: 0.0)
    cluster.request_total(2)
    alloc.requested = 2
    cluster.arrive(0.0)
    alloc.tick(1.0)
    cluster.lose("1", "Worker lost: 10.1.2.3 is not responding")
    alloc.tick(2.0)
    (lost,) = read_executor_log(tmp_path / "x.jsonl")["lost"]
    reason = "Worker lost: 10.1.2.3 is not responding"
    assert lost == {"kind": "lost", "at": 2.0, "id": "1", "host": "10.1.2.3", "reason": reason}
    assert alloc.lost == 1
    cluster.arrive(3.0)  # the cluster manager brings the replacement the target still asks for
    alloc.tick(4.0)
    assert len(cluster.executors) == 2 and alloc.lost == 1


def test_sqlite_buffers_with_an_executor_on_another_host_stop_the_run_naming_jetstream(tmp_path):
    cluster = FakeCluster(host="10.1.2.3")
    alloc = ExecutorAllocator(
        cluster, ExecutorBounds(), lambda: {"a": 1}, tmp_path / "x.jsonl", db="/r/pipeline.db"
    )
    cluster.request_total(1)
    cluster.arrive(0.0)
    alloc.tick(1.0)
    assert isinstance(alloc.error, ClusterError)
    assert (
        "10.1.2.3" in str(alloc.error)
        and "jetstream" in str(alloc.error)
        and "/r/pipeline.db" in str(alloc.error)
    )
    jet = ExecutorAllocator(
        cluster, ExecutorBounds(), lambda: {"a": 1}, tmp_path / "y.jsonl", backend="jetstream"
    )
    jet.tick(1.0)
    assert jet.error is None
    assert json.loads((tmp_path / "y.jsonl").read_text().splitlines()[-1])["kind"] == "decision"


def test_executors_go_when_a_vertex_has_had_nothing_to_do_for_idle_seconds_and_come_back_with_work(tmp_path):
    cluster, wanted = FakeCluster(), {"src": 1, "enrich": 6}
    quiet = {"src": 0.0, "enrich": 0.0}
    bounds = ExecutorBounds(cores=2, min=1, max=4, idle_seconds=10)
    alloc = ExecutorAllocator(cluster, bounds, lambda: wanted, tmp_path / "x.jsonl", clock=lambda: 0.0)
    alloc.idle_for = lambda now: quiet  # the controller's, in a run
    cluster.request_total(4)
    alloc.requested = 4
    cluster.arrive(0.0)
    assert alloc.tick(1.0).target == 4
    quiet["enrich"] = 9.5  # not yet
    assert alloc.tick(2.0).target == 4
    quiet["enrich"] = 10.0  # nothing pending, nothing processed for 10 s: its 6 replicas need no slot
    d = alloc.tick(3.0)
    assert str(d.rule) == "shrink" and d.target == 1 and len(d.kill) == 3, d
    assert alloc.ready() == {"src": 1, "enrich": 6}  # an idle vertex is not starved of slots
    quiet["enrich"] = 0.0  # a wave again
    assert str(alloc.tick(4.0).rule) == "grow" and cluster.target == 4
    assert alloc.ready() == {"src": 0, "enrich": 2}  # one executor's two cores, shared as ever


def test_an_executor_that_did_not_pay_is_let_go_and_not_asked_for_again(tmp_path):
    """The controller's progress says what the sinks delivered: a 2nd executor that added
    nothing is killed and, while that is remembered, not asked for again."""
    cluster, wanted = FakeCluster(), {"a": 4}
    delivered, t = [0.0], [0.0]
    alloc = ExecutorAllocator(
        cluster, ExecutorBounds(cores=2, min=1, max=2, payoff=0.25), lambda: wanted, tmp_path / "x.jsonl"
    )
    alloc.progress = lambda: (t[0], delivered[0], 50_000.0)  # a deep backlog throughout
    alloc.requested = 2
    cluster.request_total(2)
    cluster.arrive(0.0)
    lone = next(iter(cluster.executors))
    cluster.kill([i for i in cluster.executors if i != lone], force=True)  # one registered, one on its way
    for _ in range(20):  # 20 s at one executor: 500/s
        t[0] += 1.0
        delivered[0] += 500.0
        alloc.tick(t[0])
    cluster.arrive(t[0])
    for _ in range(20):  # 20 s at two: still 500/s
        t[0] += 1.0
        delivered[0] += 500.0
        decision = alloc.tick(t[0])
    assert decision.target == 1 and len(cluster.executors) == 1
    assert "capped at 1: a 2nd executor added 0%: 500/s → 500/s" in decision.reason
    t[0] += 1.0
    assert alloc.tick(t[0]).target == 1 and cluster.target == 1
    log = read_executor_log(tmp_path / "x.jsonl")
    assert any("capped at 1" in d["reason"] and d["kill"] for d in log["decision"])
    # What it measured is a record of its own, once per count measured and per change of the cap.
    measured = [(sorted(p["delivered_per_executors"]), p["cap"]) for p in log["payoff"]]
    assert measured == [(["1"], None), (["1", "2"], 1)], measured
    assert log["payoff"][-1]["delivered_per_executors"] == {"1": 500.0, "2": 500.0}


def test_each_vertexs_task_slots_are_published_as_they_change_and_cleared_at_the_stop(tmp_path):
    """Admission caps a batch by these (tidal.spark.batch.admission): a scale-up waiting for
    executors is admitted for the cores registered, then for all its replicas once they come."""
    cluster, wanted = FakeCluster(), {"a": 1, "b": 1}
    published: list[dict[str, int]] = []
    bounds = ExecutorBounds(cores=2, min=1, max=4)
    alloc = ExecutorAllocator(
        cluster, bounds, lambda: wanted, tmp_path / "x.jsonl", clock=lambda: 100.0, publish=published.append
    )
    alloc.requested = 1
    cluster.request_total(1)
    cluster.arrive(100.0)
    alloc.tick(100.5)
    wanted = {"a": 1, "b": 6}  # 7 replicas on 2 cores: b's share is 2, a's none
    alloc.tick(101.0)
    alloc.tick(101.5)  # nothing new: nothing written
    cluster.arrive(104.0)
    alloc.tick(104.5)
    assert published == [{"a": 1, "b": 1}, {"a": 0, "b": 2}, {"a": 1, "b": 6}]
    wanted = {"a": 3, "b": 6}  # 9 replicas, and the bounds allow 4 × 2 cores: b can never have 6
    assert alloc.attainable() == {"a": 3, "b": 5}  # of the count set now, before the next look
    alloc.stop()
    assert published[-1] == {}


def test_an_executor_given_a_task_since_it_was_listed_idle_is_not_killed_with_it(tmp_path):
    """The cluster's bursts (2026-12-06): the allocator chose executor 6 as idle from Spark's
    status store, which lags the scheduler; it had just been given `orders`' task, the forced
    kill took the task with it, and the stream stalled 5.4 s until the loss was noticed. Idle
    ones are killed unforced: Spark keeps one running a task, and the next look tries again."""
    cluster, wanted = FakeCluster(), {"a": 8}
    bounds = ExecutorBounds(cores=2, min=1, max=4)
    alloc = ExecutorAllocator(cluster, bounds, lambda: wanted, tmp_path / "x.jsonl", clock=lambda: 0.0)
    alloc.requested = 4
    cluster.request_total(4)
    cluster.arrive(100.0)
    for i in cluster.executors:
        cluster.work(i)
    wanted = {"a": 2}  # one executor will do
    cluster.running = {"2"}  # listed idle, but a task was just given to it
    d = alloc.tick(120.0)
    assert str(d.rule) == "shrink" and set(d.kill) == {"1", "2", "3"} and not d.forced
    assert set(cluster.executors) == {"2", "4"}  # 2 kept with its task
    assert "2 kept: Spark killed no executor running a task" in d.reason
    cluster.running = set()  # its task done
    d = alloc.tick(121.0)
    assert d.kill == ("2",) and set(cluster.executors) == {"4"}
    log = read_executor_log(tmp_path / "x.jsonl")
    assert "2 kept" in log["decision"][0]["reason"]


def test_a_busy_executor_chosen_after_the_shrink_wait_is_killed_with_its_task(tmp_path):
    cluster, wanted = FakeCluster(), {"a": 4}
    bounds = ExecutorBounds(cores=2, min=1, max=4, shrink_wait=30.0)
    alloc = ExecutorAllocator(cluster, bounds, lambda: wanted, tmp_path / "x.jsonl", clock=lambda: 0.0)
    alloc.requested = 2
    cluster.request_total(2)
    cluster.arrive(100.0)
    for i in cluster.executors:
        cluster.work(i, active=1)
    cluster.running = set(cluster.executors)
    wanted = {"a": 2}
    assert str(alloc.tick(120.0).rule) == "shrink-waiting"
    d = alloc.tick(151.0)
    assert len(d.kill) == 1 and d.forced == d.kill and len(cluster.executors) == 1


class Warmer:
    """Records what the allocator tells the warmer (tidal.spark.cluster.warm)."""

    def __init__(self) -> None:
        self.told: list[int] = []
        self.stopped = False

    def joined(self, cores: int) -> None:
        self.told.append(cores)

    def stop(self) -> None:
        self.stopped = True


def test_the_warmer_is_told_once_per_look_that_finds_new_executors_with_every_core_registered(tmp_path):
    cluster, wanted, warmer = FakeCluster(), {"a": 2}, Warmer()
    bounds = ExecutorBounds(cores=2, min=0, max=4)
    alloc = ExecutorAllocator(cluster, bounds, lambda: wanted, tmp_path / "x.jsonl", warmer=warmer)
    alloc.tick(100.0)  # asks for 1
    assert warmer.told == []
    cluster.arrive(101.0)
    alloc.tick(101.0)
    alloc.tick(102.0)  # the same executor again: nothing new
    assert warmer.told == [2]
    wanted = {"a": 6}  # 3 executors
    alloc.tick(103.0)
    cluster.arrive(104.0)
    alloc.tick(104.0)
    assert warmer.told == [2, 6]  # both new ones in one look: one warm-up over all 6 cores
    alloc.stop()
    assert warmer.stopped


def test_step_modules_are_the_python_steps_modules_only() -> None:
    from tidal.spark.cluster.warm import step_modules
    from tidal.spec import parse_pipeline

    spec = parse_pipeline(
        {
            "name": "m",
            "vertices": [
                {"name": "in", "source": {"generator": {"rate": 1}}},
                {"name": "a", "udf": {"map": "tidal.examples.udfs:upper"}},
                {"name": "b", "udf": {"filter": "tidal.examples.udfs:even"}},
                {"name": "c", "udf": {"builtin": {"name": "filter", "kwargs": {"expression": "true"}}}},
                {"name": "d", "udf": {"map": "json:dumps"}},
                {"name": "out", "sink": {"blackhole": {}}},
            ],
            "edges": [
                {"from": a, "to": b} for a, b in map(str.split, ["in a", "a b", "b c", "c d", "d out"])
            ],
        }
    )
    # a builtin's function is Tidal's own (what its tasks unpickle); the filter's is an expression's
    assert step_modules(spec) == ("json", "tidal.examples.udfs", "tidal.spec.expression")
