"""Tidal on a real Spark standalone cluster on 127.0.0.1: executors follow replicas.

Each run is a ``tidal run --master spark://…`` subprocess (one SparkContext per process; the
suite's own session is local mode). The clusters are real master and worker JVMs started from
the pyspark wheel and stopped by PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tidal.isb.control import ControlStore
from tidal.spark.cluster.executors import read_executor_log
from tidal.spark.cluster.standalone import StandaloneCluster

from .test_cli import lines, output, tidal
from .waits import eventually, wait_for

pytestmark = pytest.mark.spark

PIPELINE = """
name: onc
limits: {{readBatchSize: 500}}
controller: {{intervalSeconds: 0.5}}
buffers: {{backend: {backend}}}
# executorPayoff 0: these runs are about executors following replicas.
cluster: {{executorCores: 1, minExecutors: 1, maxExecutors: 4, executorPayoff: 0, shrinkWaitSeconds: 5}}
vertices:
  - name: gen
    source:
      generator: {{rate: {rate}, maxMessages: {total}, msgSize: 30}}
    scale: {{disabled: {fixed}}}
  - name: work
    udf: {{map: "tidal.examples.udfs:{udf}"}}
    scale: {{disabled: {fixed}, lookbackSeconds: 3, scaleUpCooldownSeconds: 1, scaleDownCooldownSeconds: 2,
             max: 3}}
  - name: out
    sink: {{file: {{path: out.jsonl}}}}
    scale: {{disabled: {fixed}, lookbackSeconds: 3, scaleUpCooldownSeconds: 1, scaleDownCooldownSeconds: 2,
             max: 2}}
edges:
  - {{from: gen, to: work, chain: {chain}}}
  - {{from: work, to: out, chain: {chain}}}
"""


def pipeline(
    tmp_path: Path,
    *,
    rate: int,
    total: int,
    fixed: bool = False,
    backend: str = "sqlite",
    udf: str = "upper",
    chained: bool = True,
) -> Path:
    """The test pipeline; ``chained=False`` keeps a buffer on both edges, so every vertex is a
    query with replicas (and executors) of its own."""
    path = tmp_path / "p.yaml"
    chain = "null" if chained else "false"
    path.write_text(
        PIPELINE.format(
            rate=rate, total=total, fixed=str(fixed).lower(), backend=backend, udf=udf, chain=chain
        )
    )
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=2) as running:
        yield running.info


def run_args(spec: Path, run_dir: Path, master: str, *extra: str) -> tuple[str, ...]:
    return (
        "run",
        str(spec),
        "--run-dir",
        str(run_dir),
        "--master",
        master,
        "--no-metrics",
        "--no-live",
        *extra,
    )


def stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    return out


def registered(run_dir: Path) -> int:
    counts = read_executor_log(run_dir)["count"]
    return counts[-1]["executors"] if counts else 0


@pytest.mark.long
def test_raising_replicas_brings_executors_that_run_the_next_batches_lowering_kills_idle_ones(
    tmp_path, cluster
):
    # Replicas only change when we say so; the generator never stops, so batches keep coming (with
    # maxMessages 0 it sent nothing, each query ran one empty batch, and a new executor had no task
    # to run: the test then passed only when the old executors' first tasks came late).
    spec = pipeline(tmp_path, rate=300, total=10**9, fixed=True, chained=False)  # three queries
    run_dir = tmp_path / "run"
    # A relative --run-dir: the executors, in their own working directories, must still find it.
    proc = tidal(*run_args(spec, Path("run"), cluster.master), cwd=tmp_path)
    try:
        # The master starts the run at minExecutors (1), not at spark.cores.max (4, as it did
        # before the session's first executor limit, tidal.spark.cluster.session): the allocator
        # grows it to 3 for 3 replicas and no 4th executor is ever launched for nothing.
        wait_for(lambda: registered(run_dir) == 3, 120, "3 executors for 3 replicas", proc)
        time.sleep(8)
        start = read_executor_log(run_dir)
        assert max(c["executors"] for c in start["count"]) == 3, start["count"]
        assert not [d for d in start["decision"] if d["rule"] == "shrink"], start["decision"]
        # Every step is Python: the executors' JVMs compile with C1 only (tidal.spark.cluster.jit).
        commands = executor_commands(cluster.pids)
        assert commands and all("-XX:TieredStopAtLevel=1" in c for c in commands), commands
        control = ControlStore(run_dir / "pipeline.db")
        grown_at = time.time()
        control.set_replicas("work", 2)  # Σ replicas 4 on 1-core executors → 4 executors

        def grown() -> None:
            """Four executors, and the allocator's reason for them (asserted once stopped)."""
            assert registered(run_dir) == 4, f"{registered(run_dir)} executors"
            grows = [d for d in read_executor_log(run_dir)["decision"] if d["rule"] == "grow"]
            assert grows, "no grow decision yet"
            assert grows[0]["reason"].startswith("Σ replicas 4 on 1-core executors → 4 executors"), grows

        eventually(grown, 120, "a 4th executor", proc=proc)
        try:
            wait_for(
                # the executor that registered after the request ran a task (Spark's clock: same host)
                lambda: any(
                    s["registered_at"] >= grown_at - 1 for s in read_executor_log(run_dir)["startup"]
                ),
                120,
                "a task on it",
                proc,
            )
        except AssertionError as exc:  # say what the allocator saw
            raise AssertionError(f"{exc}\n{(run_dir / 'executors.jsonl').read_text()[-3000:]}") from None
        # Lowering `out` to 0 stops its query: let it deliver first. On a loaded box (CI, 2 cores, the
        # suite's own JVM beside the cluster's) its first batch came after this point and nothing was
        # written, which said nothing about executors.
        try:
            wait_for(lambda: len(lines(run_dir / "out.jsonl")) >= 500, 180, "the sink's first batches", proc)
        except AssertionError as exc:  # say what the run saw
            raise AssertionError(f"{exc}\n{(run_dir / 'tidal.log').read_text()[-3000:]}") from None
        control.set_replicas("work", 1)
        control.set_replicas("out", 0)  # Σ 2 → 2 executors
        wait_for(lambda: registered(run_dir) == 2, 120, "two executors killed", proc)
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    assert len(lines(run_dir / "out.jsonl")) >= 500  # the pipeline ran on those executors
    log = read_executor_log(run_dir)
    rules = [d["rule"] for d in log["decision"]]
    assert "grow" in rules and "shrink" in rules, rules
    shrinks = [d for d in log["decision"] if d["rule"] == "shrink"]
    assert all("idle" in d["reason"] for d in shrinks), shrinks  # nothing was busy for long
    grow = next(d for d in log["decision"] if d["rule"] == "grow")
    assert grow["reason"].startswith("Σ replicas 4 on 1-core executors → 4 executors")
    for s in log["startup"]:
        assert 0 <= s["registered_after"] <= s["first_task_after"] < 120
    code, text = output("events", str(run_dir), "--changes")
    text = " ".join(text.split())
    assert code == 0 and "(executors)" in text and "requesting 4" in text, text


def executor_commands(worker_pids: list[int]) -> list[str]:
    """The command lines of the executor JVMs these workers launched (their children)."""
    commands = []
    for pid in executor_pids():
        try:
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent in worker_pids:
                commands.append(Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " "))
        except (OSError, ValueError, IndexError):  # gone since pgrep listed it
            continue
    return commands


def executor_pids() -> list[int]:
    found = subprocess.run(
        ["pgrep", "-f", "CoarseGrainedExecutorBackend"], check=False, capture_output=True, text=True
    )
    return [int(p) for p in found.stdout.split()]


SERIAL_UDF = """
\"\"\"Each call holds one lock shared by every process for 20 ms: however many executors run it,
the pipeline delivers at most 50 messages/s (a bottleneck no executor relieves).\"\"\"
import fcntl
import time


def serial(payload: bytes) -> bytes:
    with open({lock!r}, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        time.sleep(0.02)
    return payload.upper()
"""

# executorPayoff 1: a 3rd executor must add half of what two deliver (one call at a time: r/s,
# ≤ 50/s) — what no number of executors can do with the lock, however slow the box.
SERIAL_PIPELINE = """
name: payoff
limits: {readBatchSize: 200}
controller: {intervalSeconds: 0.5}
cluster: {executorCores: 1, minExecutors: 1, maxExecutors: 4, shrinkWaitSeconds: 5, executorPayoff: 1}
vertices:
  - name: gen
    source: {generator: {rate: 400, msgSize: 30}}
    scale: {disabled: true}
  - name: work
    udf: {map: "serial_udf:serial"}
    scale: {disabled: true}
  - name: out
    sink: {file: {path: out.jsonl}}
edges:
  - {from: gen, to: work, chain: false}
  - {from: work, to: out}
"""


@pytest.mark.long
def test_executors_that_add_nothing_are_let_go_and_nothing_is_delivered_twice(tmp_path, cluster, monkeypatch):
    """A UDF that runs one call at a time across processes: two executors deliver what four do.
    The allocator measures both counts while the backlog keeps them busy (the generator outruns
    the lock for ever), caps the executors at two and kills the ones that did not pay, saying
    what it measured; a busy executor's batch runs again, and no message is delivered twice."""
    (tmp_path / "serial_udf.py").write_text(SERIAL_UDF.format(lock=str(tmp_path / "serial.lock")))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    spec = tmp_path / "payoff.yaml"
    spec.write_text(SERIAL_PIPELINE)
    run_dir = tmp_path / "run"

    def measured() -> set[str]:  # the executor counts measured (a record each time one is new)
        return {k for p in read_executor_log(run_dir)["payoff"] for k in p["delivered_per_executors"]}

    def capped() -> list[dict]:
        return [d for d in read_executor_log(run_dir)["decision"] if "capped at 2" in d["reason"]]

    proc = tidal(*run_args(spec, run_dir, cluster.master))
    try:
        # gen and work, one replica each: two 1-core executors, measured while the backlog grows.
        wait_for(lambda: "2" in measured(), 300, "two executors measured", proc)
        ControlStore(run_dir / "pipeline.db").set_replicas("work", 3)  # Σ 4 → 4 executors
        wait_for(lambda: bool(capped()), 300, "the cap", proc)
        wait_for(lambda: registered(run_dir) == 2, 120, "the executors that did not pay let go", proc)
    except AssertionError as exc:  # say what the allocator saw
        raise AssertionError(f"{exc}\n{(run_dir / 'executors.jsonl').read_text()[-4000:]}") from None
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    ids = lines(run_dir / "out.jsonl")
    assert ids and len(ids) == len(set(ids))
    first = capped()[0]
    assert first["inputs"]["replicas"] == 4 and first["target"] == 2, first
    assert "2 more executors (4) added" in first["reason"] or "executor added" in first["reason"], first
    rates = {int(k): v for k, v in first["inputs"]["delivered_per_executors"].items()}
    assert rates[2] > 0 and max(rates) >= 3, rates  # measured at two, and at more


@pytest.mark.long
def test_the_pipeline_scales_executors_and_delivers_exactly_once_through_an_executor_and_a_driver_kill(
    tmp_path, cluster
):
    total = 16_000
    spec = pipeline(tmp_path, rate=1200, total=total)
    run_dir = tmp_path / "run"
    args = run_args(spec, run_dir, cluster.master)
    first = tidal(*args, start_new_session=True)
    try:
        wait_for(lambda: len(lines(run_dir / "out.jsonl")) >= 2000, 180, "the first messages", first)
        victims = executor_pids()
        assert victims, "no executor JVM found"
        os.kill(victims[-1], signal.SIGKILL)  # an executor mid-stream: its tasks run again elsewhere
        seen = len(lines(run_dir / "out.jsonl"))
        wait_for(
            lambda: len(lines(run_dir / "out.jsonl")) >= seen + 2000, 180, "progress after the kill", first
        )
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # then the driver, its JVM and its Python workers
        first.communicate(timeout=30)
    assert len(lines(run_dir / "out.jsonl")) < total, (
        "the run finished before the kill; the test proves nothing"
    )
    second = tidal(*args, start_new_session=True)
    try:
        wait_for(
            lambda: len(lines(run_dir / "out.jsonl")) >= total, 240, "the rest after the restart", second
        )
        # After the load: the vertices scale down, and the executors with them.

        def scaled_down() -> None:
            """A shrink decided lately, and a count that fell: the count is written once the
            killed executors are gone from Spark's list, a few seconds after the decision."""
            log = read_executor_log(run_dir)
            shrinks = [d for d in log["decision"] if d["rule"] == "shrink" and d["at"] > time.time() - 60]
            assert shrinks, "no shrink in the last minute"
            counts = [c["executors"] for c in log["count"]]
            assert counts and max(counts) > min(counts[1:], default=max(counts)), counts

        eventually(scaled_down, 120, "executors killed after the load", proc=second)
    finally:
        out = stop(second)
    ids = lines(run_dir / "out.jsonl")
    assert len(ids) == len(set(ids)) == total, (len(ids), len(set(ids)))
    assert set(ids) == {f"work:gen:{n}" for n in range(1, total + 1)}
    counts = [c["executors"] for c in read_executor_log(run_dir)["count"]]
    assert max(counts) > min(counts[1:]), counts
    assert "resumed from its checkpoints" in out
    summary = (run_dir / "report" / "summary.md").read_text()
    assert "executor-seconds" in summary and (run_dir / "report" / "executors.png").stat().st_size > 10_000
    status = json.loads((run_dir / "status.json").read_text())
    assert status["executors"] >= 1 and status["executor_cores"] >= status["executors"]


@pytest.fixture
def hidden_cluster(tmp_path: Path):
    """Workers in their own mount namespace where ``tmp_path/runs`` is an empty read-only tmpfs."""
    runs = tmp_path / "runs"
    runs.mkdir()
    with StandaloneCluster(tmp_path / "cluster", workers=1, cores=2, hide=[runs]) as running:
        yield running.info, runs


@pytest.mark.long
def test_with_jetstream_a_task_needs_nothing_from_the_drivers_disk(tmp_path, hidden_cluster):
    info, runs = hidden_cluster
    total = 3000
    # Unchained: the tasks read and write buffers (a chain of generator, map and file sink has none).
    jet = pipeline(tmp_path, rate=1000, total=total, backend="jetstream", chained=False)
    proc = tidal(*run_args(jet, runs / "jet", info.master))
    try:
        wait_for(lambda: len(lines(runs / "jet" / "out.jsonl")) >= total, 240, "every message", proc)
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    ids = lines(runs / "jet" / "out.jsonl")
    assert len(ids) == len(set(ids)) == total
    # The check can fail: the same pipeline on SQLite needs the run directory in every task.
    sqlite = pipeline(tmp_path, rate=1000, total=total, backend="sqlite", chained=False)
    proc = tidal(*run_args(sqlite, runs / "sql", info.master, "--duration", "90"))
    out = stop_when_done(proc)
    assert proc.returncode == 1, out
    assert "pipeline stopped" in out and "Read-only file system" in out and "runs/sql" in out, out


def stop_when_done(proc: subprocess.Popen, timeout: float = 240) -> str:
    """The run's output with the terminal's line wrapping undone."""
    out, _ = proc.communicate(timeout=timeout)
    return " ".join(out.split())


def test_sqlite_buffers_with_an_executor_on_another_host_are_refused_naming_jetstream(tmp_path):
    with StandaloneCluster(tmp_path / "cluster", workers=1, cores=1, host="127.0.0.2") as running:
        spec = pipeline(tmp_path, rate=100, total=100)
        proc = tidal(*run_args(spec, tmp_path / "run", running.info.master, "--duration", "90"))
        out = stop_when_done(proc)
    assert proc.returncode == 1, out
    assert "the cluster cannot run this pipeline" in out
    assert "127.0.0.2" in out and "jetstream" in out, out


def test_an_unreachable_master_is_refused_with_the_fix(tmp_path):
    spec = pipeline(tmp_path, rate=1, total=1)
    proc = tidal(*run_args(spec, tmp_path / "run", "spark://127.0.0.1:9"))
    out = stop_when_done(proc, timeout=60)
    assert proc.returncode == 1, out
    assert "cannot reach the Spark master at spark://127.0.0.1:9" in out and "tidal cluster up" in out


def test_a_cluster_too_small_for_the_executors_asked_for_is_refused_at_start(tmp_path, cluster):
    """Two alive 2-core workers of 2g: 4-core or 64g executors can never start, and 5 of 1 core
    cannot be kept; Spark would wait for them in silence. Through the master's own state, at start."""
    from tidal import errors
    from tidal.spark.cluster.standalone import check_capacity, master_state
    from tidal.spec import parse_pipeline

    base = yaml.safe_load(pipeline(tmp_path, rate=1, total=1).read_text())
    assert len([w for w in master_state(cluster.web)["workers"] if w["state"] == "ALIVE"]) == 2

    def sized(**shape: int | str):
        return parse_pipeline({**base, "cluster": shape}).cluster

    big = sized(executorCores=4, maxExecutors=2)
    with pytest.raises(errors.ClusterError, match=r"executorCores is 4 but the largest alive worker has 2"):
        check_capacity(big, cluster.master, cluster.web)
    many = sized(executorCores=1, minExecutors=5, maxExecutors=8)
    with pytest.raises(errors.ClusterError, match=r"minExecutors is 5 but 2 alive workers have room for 4"):
        check_capacity(many, cluster.master, cluster.web)
    assert check_capacity(sized(executorCores=2, minExecutors=2, maxExecutors=2), cluster.master, cluster.web)
    heavy = sized(executorCores=1, executorMemory="64g", maxExecutors=2)  # the workers offer 2g each
    with pytest.raises(errors.ClusterError, match=r"executorMemory is 64g \(65536 MB\) but .* offers 2048"):
        check_capacity(heavy, cluster.master, cluster.web)


def test_tidal_run_refuses_its_own_cluster_when_too_small_naming_the_fix(tmp_path):
    spec = pipeline(tmp_path, rate=1, total=1)
    spec.write_text(spec.read_text().replace("minExecutors: 1,", "minExecutors: 3,"))
    proc = tidal("run", str(spec), "--run-dir", str(tmp_path / "run"), "--cluster", "local:1x2",
                 "--no-metrics", "--no-live")  # fmt: skip
    out = stop_when_done(proc, timeout=180)
    assert proc.returncode == 1, out
    assert "minExecutors is 3 but 1 alive worker has room for 2 executors of 1 core" in out, out
    assert "lower minExecutors to 2 or add workers" in out


@pytest.mark.long
def test_executors_that_die_before_registering_are_an_event_with_their_words_and_a_back_off(
    tmp_path, cluster
):
    """A JVM option the executors cannot start with: the master relaunches them for ever (hundreds
    a minute) and the driver never hears of one. The run finds them on the workers (through the
    master's UI given with ``--master-ui``: the module's cluster serves it on a free port), records
    their own last words, and asks for none for 5 s, then 10 s: a back-off that doubles."""
    spec = pipeline(tmp_path, rate=10, total=1000)
    spec.write_text(
        spec.read_text().replace(
            "shrinkWaitSeconds: 5}", "shrinkWaitSeconds: 5, conf: {spark.executor.extraJavaOptions: -Xss1k}}"
        )
    )
    assert "-Xss1k" in spec.read_text()  # the template still ends its cluster block that way
    run_dir = tmp_path / "run"
    proc = tidal(*run_args(spec, run_dir, cluster.master, "--master-ui", cluster.web))
    try:
        wait_for(lambda: len(read_executor_log(run_dir).get("start failed", [])) >= 2, 240,
                 "two rounds of failed starts", proc)  # fmt: skip
    finally:
        out = stop(proc)
    log = read_executor_log(run_dir)
    first, second = log["start failed"][:2]
    assert "Could not create the Java Virtual Machine" in first["reason"], first
    assert first["hosts"] == ["127.0.0.1"] and first["count"] >= 1  # both workers are on 127.0.0.1
    assert (first["retry_in"], second["retry_in"]) == (5.0, 10.0)
    held = [d for d in log["decision"] if d["rule"] == "backoff"]
    assert held and held[0]["target"] == 0 and "failed to start" in held[0]["reason"], log["decision"]
    assert log["startup"] == [] and registered(run_dir) == 0, out[-2000:]
    code, text = output("events", str(run_dir))
    assert code == 0 and "start failed" in text and "backoff" in text, text
