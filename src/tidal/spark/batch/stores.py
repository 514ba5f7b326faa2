"""Opening a pipeline's stores: the buffers (SQLite or JetStream) and the control record.

The backend choice lives in :func:`tidal.isb.open.open_store` (the driver, the queries'
readers and writers, and the HTTP receivers open their stores there). In the Python processes Spark starts,
:func:`buffers` and :func:`control` keep one store per (backend, location) per process: readers call the store
at every trigger and writer tasks at every batch, and a new connection costs more than the call.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tidal.isb.open import open_store

if TYPE_CHECKING:
    from tidal.isb.base import Buffer, BufferStore
    from tidal.isb.control import ControlStore
    from tidal.spark.batch.config import QueryConfig

__all__ = ["buffer", "buffers", "control", "open_store"]

_STORES: dict[tuple[int, str, str], BufferStore] = {}
_CONTROLS: dict[tuple[int, str], ControlStore] = {}


def buffers(config: QueryConfig) -> BufferStore:
    """The query's buffer store, opened once per process."""
    key = (os.getpid(), config.backend, config.location)
    store = _STORES.get(key)
    if store is None:
        store = _STORES[key] = open_store(
            config.backend,
            db=config.db,
            pipeline=config.pipeline,
            url=config.url,
            durability=config.durability,
        )
    return store


def buffer(config: QueryConfig, name: str) -> Buffer:
    return buffers(config).open(name)


def control(config: QueryConfig) -> ControlStore:
    """The run's control record, opened once per process."""
    key = (os.getpid(), config.db)
    found = _CONTROLS.get(key)
    if found is None:
        from tidal.isb.control import ControlStore

        found = _CONTROLS[key] = ControlStore(config.db, config.durability)
    return found
