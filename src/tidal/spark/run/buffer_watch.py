"""Buffer servers as the run sees them: a JetStream server gone silent is a fault, with its cause.

Every ``WATCH_EVERY`` seconds the driver asks each buffer's stream who leads it and when each of
its other replicas was last heard from (JetStream's own ``stream info``: one request a buffer).
A replica unheard for ``SILENT_AFTER`` seconds (or never heard by a leader elected that long ago:
:func:`tidal.isb.jetstream.unheard_seconds`) means its server is dead or cut off: the run
records it once per server, as ``buffer server silent`` in the fault log (``tidal events``), with
the buffers it keeps a copy of and their leaders now; when the server answers again, ``buffer
server back``. The replicas left keep every message, so nothing else changes: the record is for
the person asking "why did the sink stall for 5 s?". Only for JetStream with ``replicas`` > 1 (one
server's loss stops a single-server run with its own error).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from tidal.controller.faults import FaultLog

__all__ = ["SILENT_AFTER", "BufferWatch", "start_buffer_watch"]

log = logging.getLogger("tidal.buffers")

WATCH_EVERY = 2.0  # seconds between looks
SILENT_AFTER = 3.0  # seconds a replica may go unheard (a follower hears from its leader every ~1 s)


class BufferWatch:
    def __init__(self, store: Any, buffers: Iterable[str], faults: FaultLog) -> None:
        self._store, self._buffers, self._faults = store, list(buffers), faults
        self._silent: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tidal-buffer-watch", daemon=True)

    def start(self) -> BufferWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching, after one last look: a server lost in a run's last seconds (its buffers'
        elections can hold every look for ~10 s) is still on the record."""
        self._stop.set()
        self._thread.join(timeout=10)
        if self._thread.is_alive():  # still in a look: that one is the last
            return
        try:
            self.check(time.time())
        except Exception as exc:
            log.debug("buffer watch, last look: %s", exc)

    def _run(self) -> None:
        while not self._stop.wait(WATCH_EVERY):
            try:
                self.check(time.time())
            except Exception as exc:  # a look that failed (mid fail-over) is tried again next time
                log.debug("buffer watch: %s", exc)

    def check(self, now: float) -> None:
        """One look: record the servers that went silent, and those back, since the last."""
        silent: dict[str, list[str]] = {}  # server → the buffers it keeps a replica of
        unheard: dict[str, float] = {}
        leaders: dict[str, str] = {}
        for name in self._buffers:
            try:
                leader, replicas = self._store.replica_view(name)
            except Exception:  # this buffer's leader is being elected: the next look sees it
                continue
            leaders[name] = leader or "none (an election)"
            for server, seconds in replicas.items():
                if seconds > SILENT_AFTER:
                    silent.setdefault(server, []).append(name)
                    unheard[server] = max(unheard.get(server, 0.0), seconds)
        for server in sorted(silent.keys() - self._silent):
            kept = silent[server]
            now_led = ", ".join(sorted({f"{b}: {leaders[b]}" for b in kept}))
            reason = (
                f"JetStream server {server} unheard for {unheard[server]:.0f} s: it keeps a replica of "
                f"{len(kept)} buffer(s); the others keep every message (leaders now {now_led})"
            )
            self._faults.record("buffer server silent", "(buffers)", reason, at=now, server=server)
            log.warning("%s", reason)
        for server in sorted(self._silent - silent.keys()):
            self._faults.record(
                "buffer server back", "(buffers)", f"JetStream server {server} answers again", at=now,
                server=server,
            )  # fmt: skip
            log.info("JetStream server %s answers again", server)
        self._silent = set(silent)


def start_buffer_watch(store: Any, spec: Any, buffers: Iterable[str], faults: FaultLog) -> BufferWatch | None:
    """The watch of a run whose buffers have replicas on several servers, else ``None``."""
    if spec.buffers.backend != "jetstream" or spec.buffers.replicas < 2:
        return None
    return BufferWatch(store, buffers, faults).start()
