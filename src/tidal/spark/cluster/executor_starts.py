"""Executors that die before they register, found where they died: on the standalone workers.

Spark's driver never hears of an executor that exits before it registers (a bad JVM option, a
Python it cannot start, a worker gone mid-launch): such an executor is in neither its status
store nor its listener bus. The standalone master relaunches it at once, for ever while the
application wants more executors — measured: 349 launches in 6 s with ``-Xss1k``, and a run that
delivered nothing for its whole length without a word. The workers keep them: each worker's
``/json/`` lists its finished executors with their application, and its ``/log`` serves their
stderr and stdout.

:class:`StartFailures` reads them for one application: :meth:`StartFailures.new` returns the
executors that finished since the last call without ever registering with the driver, with the
last lines each printed (the JVM's or Python's own reason). The allocator records them as an
event and backs off (:func:`tidal.scaling.executors.decide_executors`).
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ["FailedStart", "StartFailures"]

_TIMEOUT = 2.0  # seconds per request to a master or worker UI


@dataclass(frozen=True)
class FailedStart:
    worker: str  # the worker's host
    id: str  # the executor id the master gave it
    words: str  # the last lines it printed: its reason


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=_TIMEOUT) as answer:
        body = answer.read()
    return json.loads(body) if body[:1] in (b"{", b"[") else body.decode(errors="replace")


class StartFailures:
    def __init__(self, master_web: str, app_id: str) -> None:
        self.master_web, self.app_id = master_web.rstrip("/"), app_id
        self._seen: set[tuple[str, str]] = set()  # (worker UI, executor id) already reported

    def new(self, registered: Collection[str]) -> list[FailedStart]:
        """Executors of this application that finished since the last call and are not among
        ``registered`` (every id the driver ever listed); the newest's words read per worker."""
        state = _get(self.master_web + "/json/")
        found: list[FailedStart] = []
        for worker in state.get("workers", []):
            if worker.get("state") != "ALIVE" or not worker.get("webuiaddress"):
                continue
            ui = str(worker["webuiaddress"]).rstrip("/")
            try:
                finished = _get(ui + "/json/").get("finishedexecutors", [])
            except (OSError, ValueError):
                continue  # a worker going away: the master drops it soon
            ids = [str(e["id"]) for e in finished if e.get("appid") == self.app_id]
            fresh = [i for i in ids if (ui, i) not in self._seen and i not in registered]
            self._seen.update((ui, i) for i in ids)
            if fresh:
                words = self._words(ui, fresh[-1])
                found.extend(FailedStart(str(worker.get("host", ui)), i, words) for i in fresh)
        return found

    def _words(self, ui: str, executor: str) -> str:
        """The last non-empty lines of the executor's stderr (after the launch command) and stdout."""
        lines: list[str] = []
        for kind in ("stdout", "stderr"):
            asked = {"appId": self.app_id, "executorId": executor, "logType": kind, "byteLength": 20_000}
            query = urllib.parse.urlencode({**asked, "offset": 0})
            try:
                text = str(_get(f"{ui}/log?{query}"))
            except (OSError, ValueError):
                continue
            own = text.splitlines()
            rule = [n for n, line in enumerate(own) if line.strip() and set(line.strip()) == {"="}]
            if rule:  # stderr starts with the launch command, then a line of "=": skip them
                own = own[rule[-1] + 1 :]
            lines += [line.strip() for line in own if line.strip()]
        return " ".join(lines[-3:]) if lines else "no output (see the worker's work directory)"
