"""A Spark standalone cluster spread over the rig's hosts: the master on one, a worker on each other.

Each daemon runs in its host's namespace, bound to the host's address (``SPARK_LOCAL_IP``), and
its executors start there too: a task on a worker host reaches the driver, the buffers and the
other hosts only across the rig's bridge. The daemons are the host's processes, so
:meth:`~tidal.rig.hosts.Host.kill` takes a worker down with its executors (a lost host).
:func:`start_spark_cluster` returns once the master, asked from ``probe_from``, reports every
worker alive; :func:`alive_workers` asks it again (after a loss, say).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tidal import errors
from tidal.rig.hosts import Host
from tidal.spark.cluster.standalone import daemon_env, spark_home

__all__ = ["RigCluster", "alive_workers", "start_spark_cluster"]

MASTER_PORT, MASTER_WEB_PORT, WORKER_WEB_PORT = 7077, 8080, 8081

# Run on a host (the master answers on the rig's addresses only): its /json/ state.
_STATE = """
import json, sys
from tidal.spark.cluster.standalone import master_state
print(json.dumps(master_state(sys.argv[1], timeout=5)))
"""

# Run on a host: exit 0 once the master reports that many alive workers, else exit 1 with why.
_WAIT = """
import sys, time
from tidal.spark.cluster.standalone import master_state
deadline, want, last = time.monotonic() + float(sys.argv[3]), int(sys.argv[2]), None
while time.monotonic() < deadline:
    try:
        alive = int(master_state(sys.argv[1], timeout=5).get("aliveworkers", 0))
        if alive >= want:
            sys.exit(0)
        last = f"{alive} alive workers"
    except (OSError, ValueError) as exc:
        last = repr(exc)
    time.sleep(0.3)
sys.exit(f"waited for {want} alive workers: {last}")
"""


@dataclass(frozen=True)
class RigCluster:
    master: str  # spark://ADDRESS:7077 on the master's host
    web: str  # http://ADDRESS:8080, reachable from the rig's hosts only
    master_host: Host
    workers: tuple[Host, ...]


def _spawn(host: Host, directory: Path, name: str, args: list[str]) -> None:
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    out = open(directory / "logs" / f"{name}.out", "ab")  # noqa: SIM115 - the child owns it
    host.popen(
        [str(spark_home() / "bin" / "spark-class"), *args],
        env=daemon_env(host.address, directory / "logs", directory / "work" / host.name),
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    out.close()


def start_spark_cluster(
    master_host: Host,
    workers: Sequence[Host],
    directory: Path,
    *,
    cores: int = 1,
    memory: str = "1g",
    probe_from: Host | None = None,
    timeout: float = 120.0,
) -> RigCluster:
    """The master on ``master_host``, a worker of ``cores`` cores on each of ``workers``."""
    address = master_host.address
    cluster = RigCluster(
        f"spark://{address}:{MASTER_PORT}", f"http://{address}:{MASTER_WEB_PORT}", master_host, tuple(workers)
    )
    _spawn(
        master_host, directory, f"master-{master_host.name}",
        ["org.apache.spark.deploy.master.Master", "--host", address, "--port", str(MASTER_PORT),
         "--webui-port", str(MASTER_WEB_PORT)],
    )  # fmt: skip
    for host in workers:
        (directory / "work" / host.name).mkdir(parents=True, exist_ok=True)
        _spawn(
            host, directory, f"worker-{host.name}",
            ["org.apache.spark.deploy.worker.Worker", "--host", host.address, "--cores", str(cores),
             "--memory", memory, "--webui-port", str(WORKER_WEB_PORT),
             "--work-dir", str(directory / "work" / host.name), cluster.master],
        )  # fmt: skip
    probe = probe_from or master_host
    done = probe.run(
        [sys.executable, "-c", _WAIT, cluster.web, str(len(workers)), str(timeout)], timeout=timeout + 30
    )
    if done.returncode != 0:
        raise errors.ClusterError(
            f"the Spark cluster on the rig ({cluster.master}) did not come up: {done.stderr.strip()[-300:]} "
            f"(logs: {directory / 'logs'})"
        )
    return cluster


def alive_workers(cluster: RigCluster, probe_from: Host) -> list[str]:
    """The hosts (addresses) of the workers the master sees alive now."""
    done = probe_from.run([sys.executable, "-c", _STATE, cluster.web], timeout=30)
    if done.returncode != 0:
        raise errors.ClusterError(
            f"the Spark master at {cluster.web} does not answer: {done.stderr.strip()[-300:]}"
        )
    state = json.loads(done.stdout)
    return sorted(w["host"] for w in state.get("workers", []) if w.get("state") == "ALIVE")
