"""Opening a pipeline's buffer store by backend: the one home for that choice.

The driver (:class:`~tidal.spark.run.pipeline.PipelineRun`), the queries' readers and writers
(:mod:`tidal.spark.batch.stores`) and the HTTP source's receivers (:mod:`tidal.request.receiver`) all
open their store here.
"""

from __future__ import annotations

from tidal import errors
from tidal.isb.base import BufferStore
from tidal.isb.durability import DEFAULT, Durability

__all__ = ["open_store"]


def open_store(
    backend: str,
    *,
    db: str,
    pipeline: str,
    url: str | None = None,
    replicas: int = 1,
    durability: Durability = DEFAULT,
) -> BufferStore:
    """A new store of ``backend`` (``sqlite``: the file ``db``; ``jetstream``: the servers at
    ``url``, whose streams it makes keep ``replicas`` copies). ``durability``: when an append
    counts as stored (:mod:`tidal.isb.durability`; a JetStream server's own setting decides
    for it, checked at start by :func:`tidal.isb.natsd.check_server_sync`)."""
    if backend == "sqlite":
        from tidal.isb.sqlite import SqliteStore

        return SqliteStore(db, durability=durability)
    if backend == "jetstream":
        from tidal.isb.jetstream import JetStreamStore

        if url is None:
            raise errors.SpecError(
                "buffers.url", "is required with backend jetstream", "set it to the server's nats:// address"
            )
        return JetStreamStore(url, pipeline, replicas=replicas)
    raise errors.SpecError(
        "buffers.backend", f"{backend!r} is not a buffer backend", "use sqlite or jetstream"
    )
