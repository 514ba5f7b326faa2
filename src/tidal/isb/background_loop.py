"""One asyncio loop in a daemon thread per process, for synchronous callers of async clients.

The JetStream buffers are called from Spark's Python workers and the driver, which are
synchronous; nats-py is asyncio. Each process keeps one loop in a daemon thread (made again in a
forked child, whose parent's thread did not come along) and submits coroutines to it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundLoop"]

T = TypeVar("T")


class BackgroundLoop:
    """One asyncio loop in a daemon thread per process; sync callers submit coroutines to it."""

    _instance: BackgroundLoop | None = None
    _pid = -1
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="tidal-nats", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls) -> BackgroundLoop:
        with cls._lock:
            if cls._instance is None or cls._pid != os.getpid():
                cls._instance, cls._pid = cls(), os.getpid()
            return cls._instance

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)
