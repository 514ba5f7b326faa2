"""Spark's noise stays in the run's log file: ``spark_output_to(RUN_DIR / "spark.log")``.

The JVM Spark starts and its Python workers write to file descriptor 2, stack traces included;
py4j logs through Python's root logger. Inside this context both go to the file, while Tidal's
own log lines and the live view keep the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["spark_output_to"]


@contextlib.contextmanager
def spark_output_to(path: Path) -> Iterator[None]:
    """Send whatever writes to file descriptor 2 — the JVM Spark starts, its Python workers,
    their stack traces — to ``path``, and so does Python's root logger (py4j logs a call that a
    Ctrl-C interrupts there, with its traceback, through ``logging.exception``); Python's own
    ``sys.stderr`` (Tidal's log lines) keeps pointing at the terminal."""
    sys.stderr.flush()
    terminal = os.dup(2)
    spark_log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    original = sys.stderr
    stream = os.fdopen(terminal, "w", buffering=1, closefd=False)
    tidal_logger = logging.getLogger("tidal")
    handlers = [h for h in tidal_logger.handlers if isinstance(h, logging.StreamHandler)]
    root = logging.getLogger()
    root_file = open(path, "a", buffering=1)  # noqa: SIM115 - closed in the finally below
    root_handler = logging.StreamHandler(root_file)
    root_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root.addHandler(root_handler)  # a root with a handler is never configured onto the terminal
    try:
        os.dup2(spark_log, 2)
        sys.stderr = stream
        for handler in handlers:
            if getattr(handler, "stream", None) is original:
                handler.setStream(stream)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(terminal, 2)
        sys.stderr = original
        for handler in handlers:
            if getattr(handler, "stream", None) is stream:
                handler.setStream(original)
        stream.close()
        os.close(terminal)
        os.close(spark_log)
        root.removeHandler(root_handler)
        root_file.close()
