"""An embedded Spark standalone cluster on 127.0.0.1: a master and N workers, for trying and testing.

The pip wheel of PySpark has the JVM classes but no ``sbin/start-*.sh``; the cluster starts each
daemon with ``bin/spark-class org.apache.spark.deploy.{master.Master,worker.Worker}``, on free
loopback ports, waits until the master reports every worker alive, and stops them by PID (the
recorded PID is the JVM itself: ``spark-class`` execs ``java``). Nothing listens beyond
127.0.0.1. Logs and the workers' directories (executors' stdout/stderr, their working
directories) live under the cluster's directory.

``hide`` starts the workers in their own mount namespace (``unshare -m``, root only) with each
given directory covered by an empty read-only tmpfs: their executors cannot see the driver's
run directory, which is how the tests prove that a task needs nothing from the driver's disk.

``tidal cluster up DIR`` keeps one running between commands (``cluster.json`` holds its master
URL and PIDs); ``tidal cluster down DIR`` stops it; ``tidal run --cluster local:N`` starts one for
the run and stops it afterwards.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tidal import errors
from tidal.processes import alive

__all__ = [
    "ClusterInfo",
    "StandaloneCluster",
    "daemon_env",
    "free_port",
    "master_cores",
    "master_state",
    "parse_cluster",
]

log = logging.getLogger("tidal.cluster")

STATE_FILE = "cluster.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def daemon_env(address: str, logs: Path, work: Path) -> dict[str, str]:
    """The environment of a standalone master or worker bound to ``address``: in the foreground
    (``spark-class`` execs ``java``, so its PID is the JVM's), logs in ``logs``, executors'
    directories in ``work``, and this interpreter for their Python workers."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=address,
        SPARK_LOG_DIR=str(logs),
        SPARK_WORKER_DIR=str(work),
        PYSPARK_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
    )
    return env


def parse_cluster(text: str) -> tuple[int, int]:
    """``local:N`` or ``local:NxC`` (N workers of C cores, 2 by default) → (N, C)."""
    found = re.fullmatch(r"local:(\d+)(?:x(\d+))?", text.strip())
    if not found or int(found.group(1)) < 1 or (found.group(2) is not None and int(found.group(2)) < 1):
        raise errors.SpecError(
            "--cluster",
            f"{text!r} is not local:N or local:NxC",
            "e.g. local:3 (3 workers of 2 cores) or local:2x4",
        )
    return int(found.group(1)), int(found.group(2) or 2)


def master_state(web_url: str, timeout: float = 2.0) -> dict[str, Any]:
    """The master's own view (``/json/``): workers, their cores, the applications."""
    with urllib.request.urlopen(f"{web_url}/json/", timeout=timeout) as response:
        state: dict[str, Any] = json.load(response)
        return state


def master_address(master: str) -> tuple[str, str]:
    """``spark://HOST:PORT`` → ``(HOST, PORT)``, as written (the port is not checked here)."""
    host, _, port = master.removeprefix("spark://").rpartition(":")
    return host, port


DEFAULT_WEB_PORT = 8080  # a standalone master's web UI unless spark.master.ui.port says otherwise


def master_cores(master: str, cluster: Any) -> tuple[int, str]:
    """The most cores a run on ``master`` can have, and where that comes from: ``local[K]``'s
    ``K`` (the machine's for ``local[*]``); on a cluster manager ``cluster.maxExecutors ×
    executorCores`` (``cluster``: the spec's ``cluster`` section)."""
    if master.startswith("local"):
        inside = master[len("local") :].strip("[]").split(",")[0]
        if inside in ("", "*"):
            count = 1 if inside == "" else os.cpu_count() or 1
        else:
            count = int(inside) if inside.isdigit() else 1
        return count, f"master {master}"
    return (
        cluster.max_executors * cluster.executor_cores,
        f"cluster.maxExecutors {cluster.max_executors} × executorCores {cluster.executor_cores}",
    )


def default_master_web(master: str) -> str | None:
    """``spark://HOST:PORT`` → its web UI at Spark's default port; ``None`` for another master."""
    if not master.startswith("spark://"):
        return None
    return f"http://{master_address(master)[0]}:{DEFAULT_WEB_PORT}"


def capacity_problem(state: Mapping[str, Any], cluster: Any) -> str | None:
    """What stops the master's alive workers from running ``cluster``'s executors, or ``None``.

    An executor takes ``executorCores`` cores and ``executorMemory`` on one worker, so a worker
    with fewer of either never hosts one: with every worker that small, Spark would wait for an
    executor forever, in silence. ``minExecutors`` is kept from the start, so the workers must
    hold that many executors."""
    workers = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
    each, memory = cluster.executor_cores, memory_mb(cluster.executor_memory)

    def room(w: Mapping[str, Any]) -> int:
        by_memory = int(w["memory"]) // memory if "memory" in w and memory > 0 else 10**9
        return int(min(int(w.get("cores", 0)) // each, by_memory))

    slots = sum(room(w) for w in workers)
    biggest = max((int(w.get("cores", 0)) for w in workers), default=0)
    roomiest = max((int(w["memory"]) for w in workers if "memory" in w), default=None)
    if not workers:
        return "the master has no alive worker: start one (tidal cluster up, or start-worker.sh)"
    if biggest < each:
        return (
            f"cluster.executorCores is {each} but the largest alive worker has {biggest} cores, so no "
            f"executor can start: lower executorCores to {biggest} or add bigger workers"
        )
    if slots == 0 and roomiest is not None:
        return (
            f"cluster.executorMemory is {cluster.executor_memory} ({memory} MB) but the alive worker with "
            f"the most memory offers {roomiest} MB, so no executor can start: lower executorMemory to "
            f"{roomiest}m or less, or give the workers more (SPARK_WORKER_MEMORY, --memory)"
        )
    if cluster.min_executors > slots:
        have = "has" if len(workers) == 1 else "have"
        held = f"{_count(len(workers), 'alive worker')} {have} room for {_count(slots, 'executor')}"
        return (
            f"cluster.minExecutors is {cluster.min_executors} but {held} of {_count(each, 'core')} "
            f"and {cluster.executor_memory}: lower minExecutors to {slots} or add workers"
        )
    return None


def memory_mb(text: str) -> int:
    """A JVM memory string as Spark reads ``spark.executor.memory`` (``512m``, ``2g``; a bare
    number is MiB) → MiB."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    text = text.strip().lower()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "s")


def check_capacity(cluster: Any, master: str, web_url: str | None = None) -> bool:
    """Refuse at start a cluster too small for ``cluster`` (:func:`capacity_problem`). The master's
    state comes from its web UI: ``web_url``, else Spark's default port on the master's host; a
    master whose UI does not answer there is not checked (False), one that answers is (True)."""
    url = web_url or default_master_web(master) or ""
    try:
        state = master_state(url)
    except (OSError, ValueError):
        if web_url is not None:
            raise errors.ClusterError(f"the Spark master's web UI at {web_url} does not answer") from None
        return False
    problem = capacity_problem(state, cluster)
    if problem is not None:
        raise errors.ClusterError(f"the cluster at {master} cannot run this pipeline: {problem}")
    return True


@dataclass
class ClusterInfo:
    """What a running cluster is: enough to use it from another command and to stop it."""

    master: str  # spark://127.0.0.1:PORT
    web: str  # http://127.0.0.1:PORT
    pids: list[int] = field(default_factory=list)  # master first
    workers: int = 0
    cores: int = 0


class StandaloneCluster:
    """``StandaloneCluster(dir, workers=2, cores=2).start()`` … ``stop()`` (or a context)."""

    def __init__(
        self,
        directory: str | Path,
        *,
        workers: int = 2,
        cores: int = 2,
        memory: str = "2g",
        host: str = "127.0.0.1",
        hide: list[str | Path] | None = None,
        start_timeout: float = 90.0,
    ) -> None:
        self.dir = Path(directory).resolve()
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.host = host
        self.hide = [Path(p).resolve() for p in hide or []]
        self.start_timeout = start_timeout
        self.info: ClusterInfo | None = None
        self._procs: list[subprocess.Popen[bytes]] = []

    # -- lifecycle -----------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        return daemon_env(self.host, self.dir / "logs", self.dir / "work")

    def _spawn(self, name: str, args: list[str], prefix: list[str] | None = None) -> None:
        out = open(self.dir / "logs" / f"{name}.out", "ab")  # noqa: SIM115 - the child owns it
        command = [*(prefix or []), str(spark_home() / "bin" / "spark-class"), *args]
        proc = subprocess.Popen(
            command,
            env=self._env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C at the terminal reaches Tidal, which stops them in order
        )
        out.close()
        self._procs.append(proc)

    def _hiding_prefix(self) -> list[str]:
        if not self.hide:
            return []
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            raise errors.TidalError("hiding directories from the workers needs root and unshare(1)")
        mounts = " && ".join(f"mount -t tmpfs -o ro,size=1m tmpfs {p}" for p in self.hide)
        # --propagation private: the tmpfs stays in the workers' namespace.
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", f'{mounts} && exec "$0" "$@"']

    def start(self) -> StandaloneCluster:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        (self.dir / "work").mkdir(parents=True, exist_ok=True)
        port, web = free_port(), free_port()
        master, web_url = f"spark://{self.host}:{port}", f"http://{self.host}:{web}"
        began = time.monotonic()
        self._spawn(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", self.host, "--port", str(port),
             "--webui-port", str(web)],
        )  # fmt: skip
        self.info = ClusterInfo(master, web_url, [p.pid for p in self._procs], self.workers, self.cores)
        try:
            self._wait(lambda s: True, "the master to answer")
            prefix = self._hiding_prefix()
            for i in range(self.workers):
                self._spawn(
                    f"worker-{i}",
                    ["org.apache.spark.deploy.worker.Worker", "--host", self.host, "--cores",
                     str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()),
                     "--work-dir", str(self.dir / "work" / f"worker-{i}"), master],
                    prefix,
                )  # fmt: skip
            self.info.pids = [p.pid for p in self._procs]
            self._wait(lambda s: int(s.get("aliveworkers", 0)) >= self.workers, "every worker to register")
        except BaseException:
            self.stop()
            raise
        log.info(
            "standalone cluster up in %.1f s: %s, %d workers × %d cores (logs: %s)",
            time.monotonic() - began, master, self.workers, self.cores, self.dir / "logs",
        )  # fmt: skip
        (self.dir / STATE_FILE).write_text(json.dumps(asdict(self.info)))
        return self

    def _wait(self, ready: Any, what: str) -> None:
        assert self.info is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise errors.TidalError(
                        f"a Spark daemon exited with {proc.returncode} while waiting for {what}: "
                        f"see {self.dir / 'logs'}"
                    )
            with contextlib.suppress(OSError, ValueError):
                if ready(master_state(self.info.web)):
                    return
            time.sleep(0.2)
        raise errors.TidalError(
            f"timed out after {self.start_timeout:g} s waiting for {what}: see {self.dir / 'logs'}"
        )

    def stop(self) -> None:
        """Workers first (they stop their executors), then the master; SIGKILL after 10 s."""
        stop_pids(list(reversed([p.pid for p in self._procs])))
        for proc in self._procs:
            with contextlib.suppress(Exception):
                proc.wait(timeout=1)
        self._procs = []
        with contextlib.suppress(FileNotFoundError):
            (self.dir / STATE_FILE).unlink()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- from another command ------------------------------------------------------------------

    @staticmethod
    def read(directory: str | Path) -> ClusterInfo:
        path = Path(directory) / STATE_FILE
        try:
            return ClusterInfo(**json.loads(path.read_text()))
        except FileNotFoundError:
            raise errors.TidalError(f"no cluster is running from {directory} (no {STATE_FILE})") from None

    @staticmethod
    def down(directory: str | Path) -> ClusterInfo:
        info = StandaloneCluster.read(directory)
        stop_pids(list(reversed(info.pids)))
        (Path(directory) / STATE_FILE).unlink()
        return info


def stop_pids(pids: list[int], grace: float = 10.0) -> None:
    """SIGTERM each PID, wait up to ``grace`` seconds for all, then SIGKILL what is left."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(p, reap_child=True) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if alive(pid, reap_child=True):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
