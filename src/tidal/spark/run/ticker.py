"""A thread that calls ``tick(now)`` at the controller's interval: the state-partition policy's
and the shuffle follower's (each moves or restarts queries for seconds, which the replica
controller's own loop must not wait for).

A tick that raises is logged with its traceback and the next one comes as usual: a policy must
never stop the pipeline. While ``paused()`` (a paused pipeline) no tick runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Ticker"]

log = logging.getLogger("tidal.pipeline")


class Ticker:
    def __init__(self, name: str, what: str) -> None:
        self.name = name  # the thread's
        self.what = what  # the log's words for a failed tick
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(
        self, tick: Callable[[float], Any], interval: Callable[[], float], paused: Callable[[], bool]
    ) -> None:
        def loop() -> None:
            while not self._stop.wait(interval()):
                if paused():
                    continue
                try:
                    tick(time.time())
                except Exception:  # the traceback is logged; the pipeline goes on
                    log.exception("%s failed", self.what)

        self._thread = threading.Thread(target=loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
