"""Buffers on NATS JetStream (Numaflow's own ISB), for pipelines that span hosts: the store.

One stream per buffer (:mod:`tidal.isb.jetstream_config`: its shape, replicas, fail-over), each
read and written by a :class:`~tidal.isb.jetstream_buffer.JetStreamBuffer`. The calls are
synchronous; a private event loop thread per process runs the nats-py client.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, TypeVar

from tidal import errors
from tidal.isb.background_loop import BackgroundLoop
from tidal.isb.base import DEFAULT_DEDUP_WINDOW_SECONDS, BufferLimits
from tidal.isb.jetstream_appended import AppendedBatches
from tidal.isb.jetstream_buffer import JetStreamBuffer
from tidal.isb.jetstream_config import (
    FAILOVER_SECONDS,
    REQUEST_TIMEOUT,
    check_replicas,
    peer_offline,
    refused,
    servers,
    stream_config,
    stream_name,
    through_failover,
)

__all__ = ["JetStreamBuffer", "JetStreamStore", "unheard_seconds"]

T = TypeVar("T")
_ERR_STREAM_EXISTS = 10058  # "stream name already in use with a different configuration"
# Insufficient resources; replicas > 1 on a server that is not clustered; no peers to place on.
_ERR_NO_ROOM_FOR_REPLICAS = {10023, 10074, 10005}


class JetStreamStore:
    """The buffers of one pipeline on a JetStream server or cluster at ``url``."""

    def __init__(
        self,
        url: str,
        pipeline: str,
        dedup_window: float = DEFAULT_DEDUP_WINDOW_SECONDS,
        *,
        replicas: int = 1,
    ) -> None:
        self.url = url
        self.pipeline = pipeline
        self.dedup_window = dedup_window
        self.replicas = replicas  # of each stream this store makes (jetstream_config)
        self._loop = BackgroundLoop.get()
        self._nc: Any = None
        self._pid = os.getpid()
        self._markers_made = False  # the pipeline's batch-marker stream (one for all its buffers)
        self._connect()

    def _connect(self) -> None:
        import nats

        async def connect() -> Any:
            return await nats.connect(
                servers(self.url),
                connect_timeout=3,
                max_reconnect_attempts=3,
                allow_reconnect=True,
                pending_size=64 * 1024 * 1024,
            )

        try:
            self._nc = self._loop.run(connect(), REQUEST_TIMEOUT * 3)
        except Exception as exc:
            raise errors.BufferUnavailable(
                f"cannot reach NATS JetStream at {self.url}: {type(exc).__name__}: {exc} "
                "(is the server running? check the URL)"
            ) from exc

    @property
    def nc(self) -> Any:
        if self._pid != os.getpid():  # forked: the parent's connection is not ours
            self._loop, self._pid = BackgroundLoop.get(), os.getpid()
            self._connect()
        return self._nc

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coro, REQUEST_TIMEOUT * 3)

    def call(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``make()``'s coroutine run, and again while the cluster fails over, for the store's
        ``FAILOVER_SECONDS`` (:func:`~tidal.isb.jetstream_config.through_failover`, each try cut
        at three requests' time): for idempotent calls only."""
        attempt = REQUEST_TIMEOUT * 3
        retried = through_failover(make, FAILOVER_SECONDS, attempt=attempt)
        return self._loop.run(retried, FAILOVER_SECONDS + 2 * attempt)

    def create(self, name: str, limits: BufferLimits | None = None) -> JetStreamBuffer:
        from nats.js.errors import APIError

        limits = limits or BufferLimits()
        stream = stream_name(self.pipeline, name)
        config = stream_config(self.pipeline, name, limits, self.dedup_window, self.replicas)

        async def create() -> Any:
            jsm = self.nc.jsm()
            try:
                return await jsm.add_stream(config)
            except APIError as exc:
                if peer_offline(exc):
                    raise  # a server is coming back: call() tries again through the fail-over
                if exc.err_code in _ERR_NO_ROOM_FOR_REPLICAS:
                    raise refused(exc, self.replicas, name, self.url) from None
                if exc.err_code != _ERR_STREAM_EXISTS:
                    raise
            try:
                return await jsm.update_stream(config)
            except APIError:  # it exists with another shape: checked below
                return await jsm.stream_info(stream)

        try:
            made = self.call(create)
        except APIError as exc:
            if not peer_offline(exc):
                raise
            # A peer still offline once the fail-over time is up: refused, naming the fix.
            raise refused(exc, self.replicas, name, self.url) from None
        check_replicas(made, self.replicas, name, self.url)
        if not self._markers_made:  # one stream per pipeline: made once, not once per buffer
            self.call(AppendedBatches(self, name).ensure)
            self._markers_made = True
        return JetStreamBuffer(self, name, stream, limits)

    def replica_view(self, name: str) -> tuple[str | None, dict[str, float]]:
        """Buffer ``name``'s leader, and the seconds since each other replica was heard from
        (JetStream's ``stream info``: :func:`unheard_seconds`)."""
        stream = stream_name(self.pipeline, name)

        async def info() -> Any:
            return await self.nc.jsm().stream_info(stream)

        cluster = self.run(info()).cluster
        if cluster is None:  # a single server: no replicas
            return None, {}
        return cluster.leader, unheard_seconds(cluster, time.time())

    def open(self, name: str) -> JetStreamBuffer:
        from nats.js.errors import NotFoundError

        stream = stream_name(self.pipeline, name)

        async def info() -> Any:
            return await self.nc.jsm().stream_info(stream)

        try:
            si = self.call(info)
        except NotFoundError:
            raise errors.BufferNotFound(name) from None
        meta = si.config.metadata or {}
        limits = BufferLimits(int(si.config.max_msgs), float(meta.get("tidal.usage_limit", "0.8")))
        return JetStreamBuffer(self, name, stream, limits)

    def list(self) -> list[str]:
        prefix = stream_name(self.pipeline, "")

        async def names() -> list[str]:
            out = []
            for si in await self.nc.jsm().streams_info():
                if si.config.name.startswith(prefix):
                    out.append((si.config.metadata or {}).get("tidal.buffer", si.config.name[len(prefix) :]))
            return sorted(out)

        return self.call(names)

    def drop(self, name: str) -> None:
        from nats.js.errors import NotFoundError

        async def delete() -> None:
            await self.nc.jsm().delete_stream(stream_name(self.pipeline, name))

        try:
            self.run(delete())
        except NotFoundError:
            raise errors.BufferNotFound(name) from None
        self.run(AppendedBatches(self, name).forget())  # a buffer made again starts with no batches

    def close(self) -> None:
        if self._nc is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):  # closing a broken connection is best effort
                self.run(self._nc.close())
        self._nc = None


def unheard_seconds(cluster: Any, now: float) -> dict[str, float]:
    """Seconds since the stream's leader last heard from each other replica.

    JetStream's ``active`` counts from the last contact *this* leader had with the replica. A
    leader elected since a server died never had one: it reports ``active`` 0 and the replica not
    ``current`` (measured on nats-server 2.15: the dead former leader stayed at 0.0 s for 25 s).
    Such a replica is unheard since the election (``leader_since``), else a server that led every
    buffer it kept would never look silent."""
    since = getattr(cluster, "leader_since", None)
    if isinstance(since, str):
        since = datetime.fromisoformat(since.replace("Z", "+00:00"))
    elected = since.timestamp() if isinstance(since, datetime) else None
    out: dict[str, float] = {}
    for r in cluster.replicas or []:
        if r.active:
            out[r.name] = r.active / 1e9
        elif not r.current and elected is not None:
            out[r.name] = max(0.0, now - elected)
        else:
            out[r.name] = 0.0
    return out
