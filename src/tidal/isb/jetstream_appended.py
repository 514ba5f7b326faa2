"""Which batches a JetStream buffer holds already, kept where a nats-server restart cannot lose it.

A JetStream buffer de-duplicates a replayed batch through ``Nats-Msg-Id`` (``<key>#<i>``), and the
server keeps those ids in memory only. At a start it rebuilds them from the messages the stream
still stores, so once a downstream commit has purged a batch's messages a restarted server has
forgotten their ids, and the same batch replayed is appended again (measured on the nats-server
installed here; nats-io/nats-server #3272, open since 2022). Tidal's own server restarts with every
driver restart and after every power cut, which is exactly when Spark replays the batch whose
``commits`` entry did not survive: CI saw a whole batch (150 ids) delivered twice at a file sink
after two cuts.

So each ``append_batch`` also leaves a marker, the batch's key and how many messages it held, in a
stream of the pipeline's own (``TIDALAPPENDED_<pipeline>``, one subject per buffer and key, the
newest :data:`KEPT` markers kept, whatever their age: like a SQLite buffer's newest 10,000 keys
per buffer, a replay long after a cut is still recognised, which the server's two-minute window
never did). A batch whose marker is there is answered as duplicates without publishing. The
marker is written after the batch's last message is acknowledged: a crash between the two leaves
the server's in-memory ids as the only guard, for the few milliseconds of one more publish.

**Fail-over.** The marker stream has the buffers' replicas, and when a server dies it elects a
leader like theirs: for a few seconds a marker's publish finds "no response from stream" (CI saw
it stop a run on the multi-host rig, a worker host and its server lost). Reading and writing a
marker are idempotent (one per subject, the same count), so both are tried again through the
fail-over errors (:func:`~tidal.isb.jetstream_config.through_failover`) for :data:`MARKER_SECONDS`;
past that the error fails the task, and the query's restart (the buffers unreachable) replays it.
A marker never read is never taken as absent: that would publish the batch again unguarded.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any, Protocol

from tidal.isb.jetstream_config import through_failover

__all__ = ["KEPT", "MARKER_SECONDS", "AppendedBatches", "appended_stream"]

KEPT = 100_000  # markers of all the pipeline's buffers, ~100 bytes each on the server's disk
# How long a marker's read or write is tried again through a fail-over within one call of the
# store (3 × REQUEST_TIMEOUT): a Raft election takes a few seconds; the buffer calls the read
# again for the store's FAILOVER_SECONDS (an election under load took 7.5 s on CI).
MARKER_SECONDS = 8.0


def appended_stream(pipeline: str) -> str:
    """Not ``TIDAL_<pipeline>_…``: :meth:`JetStreamStore.list` takes those for buffers."""
    return "TIDALAPPENDED_" + pipeline.replace(".", "_").replace("-", "_")


class _Store(Protocol):
    pipeline: str
    replicas: int

    @property
    def nc(self) -> Any: ...


class AppendedBatches:
    """The markers of one buffer's batches, read and written from the store's event loop."""

    def __init__(self, store: _Store, buffer: str) -> None:
        self._store = store  # its connection is read at each call: a fail-over replaces it
        self._pipeline = store.pipeline
        self._stream = appended_stream(store.pipeline)
        self._prefix = f"tidal_appended.{store.pipeline}.{buffer}"

    def _subject(self, key: str) -> str:
        """A batch key may hold any character (``/``, ``:``, dots); a subject token may not."""
        return f"{self._prefix}.{hashlib.sha256(key.encode()).hexdigest()[:40]}"

    async def ensure(self) -> None:
        """Make the stream (idempotent: an existing one is left as it is)."""
        from nats.js import api
        from nats.js.errors import BadRequestError

        config = api.StreamConfig(
            name=self._stream,
            subjects=[f"tidal_appended.{self._pipeline}.>"],
            max_msgs_per_subject=1,
            max_msgs=KEPT,
            discard=api.DiscardPolicy.OLD,
            storage=api.StorageType.FILE,
            num_replicas=self._store.replicas,
            allow_direct=True,
        )
        with contextlib.suppress(BadRequestError):  # there with another shape (an older Tidal's): kept
            await self._store.nc.jsm().add_stream(config)

    async def count(self, key: str) -> int | None:
        """How many messages batch ``key`` held when it was appended; None if it was not (or
        longer ago than the window)."""
        from nats.js.errors import NotFoundError

        async def read() -> int | None:
            try:
                jsm = self._store.nc.jsm()
                msg = await jsm.get_msg(self._stream, subject=self._subject(key), direct=True)
            except NotFoundError:  # no marker
                return None
            return int(msg.data or b"0")

        return await through_failover(read, MARKER_SECONDS)

    async def record(self, key: str, messages: int) -> None:
        """Say batch ``key`` (``messages`` long) is in the buffer; acknowledged, so durable."""
        from nats.js.errors import NoStreamResponseError

        subject, data = self._subject(key), str(messages).encode()

        async def publish() -> None:
            await self._store.nc.jetstream().publish(subject, data)

        try:
            await through_failover(publish, MARKER_SECONDS)
        except NoStreamResponseError:  # still none: the stream may be gone (deleted by hand)
            await self.ensure()
            await publish()

    async def forget(self) -> None:
        """Drop every marker of this buffer (the buffer itself is being dropped)."""
        from nats.js.errors import NotFoundError

        with contextlib.suppress(NotFoundError):
            await self._store.nc.jsm().purge_stream(self._stream, subject=f"{self._prefix}.>")
