"""A NATS JetStream cluster on the rig's hosts: one ``nats-server`` per host, routed to the others.

Each server listens on its host's address (clients on 4222, routes on 6222), has its own
``server_name`` and store, and knows every other server as a route: JetStream's Raft groups
then place a stream's replicas on distinct servers. :func:`start_nats_cluster` returns once the
cluster can place a stream on every server, from a client on ``probe_from`` (a meta leader is
elected and has heard from each server: an answer from JetStream alone came too early once, and
a stream of 3 replicas was refused with "peer offline"), and gives the comma-separated URL
Tidal's ``buffers.url`` takes.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tidal import errors
from tidal.isb.natsd import nats_server_binary
from tidal.rig.hosts import Host

__all__ = ["start_nats_cluster"]

CLIENT_PORT, ROUTE_PORT = 4222, 6222

# Run on a host: a stream with a replica on every server can be made (then is deleted) within the
# deadline, else exit 1.
_READY = """
import asyncio, sys, time
import nats
from nats.js import api

async def main() -> None:
    deadline = time.monotonic() + float(sys.argv[2])
    last = None
    while time.monotonic() < deadline:
        try:
            nc = await nats.connect(sys.argv[1].split(","), connect_timeout=2, max_reconnect_attempts=1)
            try:
                jsm = nc.jsm()
                await jsm.add_stream(api.StreamConfig(name="RIG_READY", subjects=["rig.ready"],
                                                      num_replicas=int(sys.argv[3])))
                await jsm.delete_stream("RIG_READY")
                return
            finally:
                await nc.close()
        except Exception as exc:
            last = exc
            await asyncio.sleep(0.5)
    sys.exit(f"JetStream could not place a stream on every server: {last!r}")

asyncio.run(main())
"""


def start_nats_cluster(
    hosts: Sequence[Host], directory: Path, *, probe_from: Host, timeout: float = 60.0
) -> str:
    """Start a server on each of ``hosts`` (stopped with them by the rig); their URL list."""
    if len(hosts) < 3:
        raise ValueError("a JetStream cluster keeps its replicas on a majority: give it 3 hosts or more")
    routes = ",".join(f"nats-route://{h.address}:{ROUTE_PORT}" for h in hosts)
    for host in hosts:
        store = directory / f"nats-{host.name}"
        store.mkdir(parents=True, exist_ok=True)
        log = directory / f"nats-{host.name}.log"
        host.popen(
            [nats_server_binary(), "-js", "--server_name", f"nats-{host.name}", "-a", host.address,
             "-p", str(CLIENT_PORT), "--cluster_name", "tidal",
             "--cluster", f"nats://{host.address}:{ROUTE_PORT}", "--routes", routes,
             "-sd", str(store), "-l", str(log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    url = ",".join(f"nats://{h.address}:{CLIENT_PORT}" for h in hosts)
    replicas = str(min(len(hosts), 5))  # JetStream keeps at most 5
    done = probe_from.run([sys.executable, "-c", _READY, url, str(timeout), replicas], timeout=timeout + 30)
    if done.returncode != 0:
        raise errors.BufferUnavailable(
            f"the JetStream cluster at {url} did not come up in {timeout:g} s: {done.stderr.strip()[-400:]} "
            f"(logs: {directory}/nats-*.log)"
        )
    return url
