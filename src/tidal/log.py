"""Logging, configured once for the whole process.

Lines are ``time level logger key=value ...`` so that ``grep vertex=enrich`` finds a vertex's
story. Spark's own JVM log noise is turned down separately in ``tidal.spark.session``.
"""

from __future__ import annotations

import logging
import os

__all__ = ["configure", "kv"]

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
