"""What a buffer's JetStream stream is, and what a URL of several servers means: the one home of
the stream's configuration, so the driver that creates it and the check that reads it agree.

**Replicas.** ``buffers.replicas`` is the stream's ``num_replicas``: on a JetStream cluster of
three servers, 3 keeps every buffer on all three, so one server can die without losing a
message (Numaflow's JetStream ISB service keeps 3 by default). A single server holds only 1.
A stream that ends up with fewer replicas than asked (made earlier with fewer, or refused by a
cluster too small) is an error at start that names the server, the buffer and the fix, not a
quiet loss of the guarantee.

**Servers.** ``buffers.url`` may list several servers, comma-separated
(``nats://10.0.0.2:4222,nats://10.0.0.3:4222``): the client starts with whichever answers and
moves to another when its server goes away.

**Fail-over.** When a server dies, its clients reconnect to another, and the streams it led
elect a new leader among their other replicas: for a few seconds, requests time out or find no
responder. :func:`failing_over` tells those errors apart, and the store retries its idempotent
calls (reads, state, purges) through them for up to ``FAILOVER_SECONDS``. Making a stream is
retried too while the cluster answers "no suitable peers for placement, peer offline": a
server that is restarting, or not yet seen by the meta leader, comes back within seconds; a
cluster with too few servers is refused at once. Appends are not retried here: a failed append
fails the task, Spark runs it again, and the ids de-duplicate it. Two exceptions: the stream's
state and the batch's marker, read before anything is published, are read again like any
idempotent call; and "no responders", which says no server took the message, makes the buffer
publish that batch again (``JetStreamBuffer._atomic_answered``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tidal import errors
from tidal.isb.base import BufferLimits

__all__ = [
    "FAILOVER_SECONDS",
    "check_replicas",
    "failing_over",
    "peer_offline",
    "refused",
    "servers",
    "stream_config",
    "stream_name",
    "through_failover",
]

T = TypeVar("T")

REQUEST_TIMEOUT = 10.0  # seconds of one request to the server (the store's calls wait 3 times this)
FAILOVER_SECONDS = 30.0  # a Raft election takes a few seconds; a reconnect, up to its wait


def stream_name(pipeline: str, buffer: str) -> str:
    safe = f"{pipeline}_{buffer}".replace(".", "_").replace("-", "_")
    return f"TIDAL_{safe}"


def servers(url: str) -> list[str]:
    """``nats://a:4222, nats://b:4222`` → both, in order; a bad list is refused naming it."""
    found = [u.strip() for u in url.split(",") if u.strip()]
    if not found:
        raise errors.BufferUnavailable(f"buffers.url {url!r} names no server: give nats://HOST:PORT[,…]")
    return found


def stream_config(pipeline: str, name: str, limits: BufferLimits, dedup_window: float, replicas: int) -> Any:
    """The stream of buffer ``name``: ``max_msgs`` its length, ``discard=new``, file storage."""
    from nats.js import api

    return api.StreamConfig(
        name=stream_name(pipeline, name),
        subjects=[f"tidal.{pipeline}.{name}"],
        max_msgs=limits.max_length,
        discard=api.DiscardPolicy.NEW,
        storage=api.StorageType.FILE,
        num_replicas=replicas,
        duplicate_window=dedup_window,
        allow_direct=True,
        allow_atomic=True,
        metadata={"tidal.usage_limit": str(limits.usage_limit), "tidal.buffer": name},
    )


def check_replicas(info: Any, asked: int, buffer: str, url: str) -> None:
    """Refuse a stream with fewer replicas than ``buffers.replicas`` asks."""
    have = int(info.config.num_replicas or 1)
    if have < asked:
        raise errors.BufferUnavailable(
            f"buffer {buffer!r} on JetStream at {url} keeps {have} replica(s) but buffers.replicas is "
            f"{asked}: the stream was made with fewer, or the cluster has fewer servers. Add servers, "
            "lower buffers.replicas, or delete the stream (nats stream rm) to make it again"
        )


def refused(exc: Exception, asked: int, buffer: str, url: str) -> errors.BufferUnavailable:
    """A cluster's refusal to make the stream (too few servers for ``asked`` replicas), said plainly."""
    return errors.BufferUnavailable(
        f"JetStream at {url} cannot keep buffer {buffer!r} with {asked} replica(s): {exc}. A stream "
        f"needs as many JetStream servers as replicas: add servers or lower buffers.replicas"
    )


def failing_over(exc: BaseException) -> bool:
    """A timeout, no responder, a reconnecting or closed connection, JetStream unavailable, or a
    stream's placement waiting on an offline peer: what a client sees while a server is lost (or
    not yet heard from) and the cluster recovers."""
    import concurrent.futures

    import nats.errors
    from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

    transient = (
        nats.errors.TimeoutError,
        nats.errors.NoRespondersError,
        NoStreamResponseError,  # a JetStream publish's "no responders": the stream has no leader yet
        nats.errors.ConnectionReconnectingError,
        nats.errors.StaleConnectionError,
        ServiceUnavailableError,
        concurrent.futures.TimeoutError,
        TimeoutError,
    )
    return isinstance(exc, transient) or peer_offline(exc)


async def through_failover(
    make: Callable[[], Awaitable[T]], seconds: float, *, attempt: float | None = None
) -> T:
    """``make()`` awaited, and again while the cluster fails over (:func:`failing_over`), for up
    to ``seconds``: for idempotent calls only (a read, a marker, the state before a publish).
    ``attempt``: how long one try may take before it is cancelled and counted as a timeout (a
    request to a server being lost can hang past its own timeout while the client reconnects)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await (make() if attempt is None else asyncio.wait_for(make(), attempt))
        except Exception as exc:
            if not failing_over(exc) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)


def peer_offline(exc: BaseException) -> bool:
    """The cluster cannot place a stream's replicas *because a server is offline* (err 10005 "no
    suitable peers for placement, peer offline"): a restarting server, or one the meta leader has
    not heard from yet, not a cluster too small."""
    return getattr(exc, "err_code", None) == 10005 and "offline" in str(getattr(exc, "description", ""))
