"""A user-defined sink for the failure-routing examples: an endpoint that refuses a share of writes.

``FlakySink`` stands for a remote system that is sometimes down: each ``write`` raises with
probability ``failure_share`` (seeded per process), else appends the messages as JSON lines to
``path`` and syncs them. Used with ``sink.retryStrategy`` and ``sink.fallback``
(:mod:`tidal.spark.sinks.routes`) to show that a message ends up in exactly one of the two.
At least once on its own (a replayed batch writes again), as every user sink is.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

__all__ = ["FlakySink"]


class FlakySink:
    def __init__(self, path: str, failure_share: float = 0.3, seed: int | None = None) -> None:
        self.path = Path(path)
        self.failure_share = failure_share
        self._random = random.Random(seed if seed is None else seed + os.getpid())

    def write(self, messages: list[tuple[str, bytes]]) -> None:
        if self._random.random() < self.failure_share:
            raise ConnectionError(f"the sink refused {len(messages)} message(s): down for now")
        lines = "".join(
            json.dumps({"id": i, "payload": p.decode(errors="replace")}) + "\n" for i, p in messages
        )
        with self.path.open("a") as out:
            out.write(lines)
            out.flush()
            os.fsync(out.fileno())
