"""Logging, configured once for the whole process.

Lines are ``time level logger key=value ...`` so that ``grep vertex=enrich`` finds a vertex's
story. Spark's own JVM log noise is turned down separately in ``tidal.spark.cluster.session``.
"""

from __future__ import annotations

import logging
import os

__all__ = ["Repeated", "configure", "kv"]

_FORMAT = "%(asctime)s %(levelname)-5s %(name)s %(message)s"
_configured = False


def configure(level: str | int | None = None) -> None:
    """Set up the ``tidal`` logger once; later calls only change the level."""
    global _configured  # noqa: PLW0603 - process-wide, by design
    level = level or os.environ.get("TIDAL_LOG_LEVEL", "INFO")
    logger = logging.getLogger("tidal")
    logger.setLevel(level)
    if not _configured:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(_FORMAT))
        logger.addHandler(handler)
        logger.propagate = False
        for noisy in ("py4j", "py4j.clientserver", "py4j.java_gateway"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        _configured = True


def kv(**fields: object) -> str:
    """Format fields as ``key=value`` pairs (values with spaces are quoted)."""
    parts = []
    for key, value in fields.items():
        text = str(value)
        if " " in text or not text:
            text = f'"{text}"'
        parts.append(f"{key}={text}")
    return " ".join(parts)


class Repeated:
    """Log a recurring failure once per distinct kind, then a count at most every ``every``
    seconds: a source whose ``pending()`` raises at every trigger must not fill the log."""

    def __init__(self, logger: logging.Logger, every: float = 60.0) -> None:
        self._logger = logger
        self._every = every
        self._seen: dict[tuple[str, ...], list[float]] = {}  # key → [count since last line, last line at]

    def warning(self, key: tuple[str, ...], message: str, *args: object) -> None:
        import time

        now = time.monotonic()
        state = self._seen.get(key)
        if state is None:
            self._seen[key] = [0, now]
            self._logger.warning(message, *args)
            return
        state[0] += 1
        if now - state[1] >= self._every:
            count, state[0], state[1] = int(state[0]), 0, now
            self._logger.warning(message + " (%d more times in the last %g s)", *args, count, self._every)
