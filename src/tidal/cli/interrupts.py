"""Ctrl-C and SIGTERM during ``tidal run``: a clean stop, never from inside a call to the JVM.

Both signals mean "stop" (SIGTERM as Ctrl-C). Python runs a signal's handler in the main thread
wherever it is, and most of a run's main thread is the wait loop, which calls the JVM through
py4j several times a tick. A ``KeyboardInterrupt`` raised inside one of those calls breaks it
half-way: py4j then tries to cancel the command on its connection and, in PySpark's pinned
thread mode, can fail with ``Py4JError: Gateway must be connected to send cancel cmd.``, which
escaped as a traceback and exit status 1 instead of a drain and a report (seen under load with
PySpark's own SIGINT handler, whose ``cancelAllJobs`` read the interrupted call's answer, a
bool). Seen before that in CI: an interrupt py4j logged and lost, and a run that went on.

So :func:`stop_requested` records the signal and raises ``KeyboardInterrupt`` only when the main
thread is not inside py4j; inside it, the call finishes and the wait loop's check
(:func:`checked`) raises it at its next tick, a fraction of a second later. A second signal
interrupts at once, inside a call or not, as Ctrl-C did before. :func:`install`
takes SIGINT back from PySpark, whose ``SparkContext`` sets its own handler when it starts.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["checked", "clear", "install", "restore", "stop_requested"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_REQUESTED = threading.Event()  # a stop signal came, whether or not its interrupt was raised


def in_jvm_call(frame: FrameType | None) -> bool:
    """Is this frame, or one that called it, in py4j (a call to the JVM under way)?"""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("py4j"):
            return True
        frame = frame.f_back
    return False


def stop_requested(signum: int, frame: FrameType | None) -> None:
    """The handler: remember the stop; interrupt now unless a JVM call is under way. A second
    signal interrupts wherever it lands: the user insists (a call that blocks, as a query's
    stop during the drain can, would otherwise hold "Ctrl-C again to stop now" back)."""
    again = _REQUESTED.is_set()
    _REQUESTED.set()
    if again or not in_jvm_call(frame):
        raise KeyboardInterrupt


def checked(until: Callable[[], bool] | None) -> Callable[[], bool]:
    """``until`` for :meth:`PipelineRun.wait` that raises a stop the handler only remembered."""

    def check() -> bool:
        if _REQUESTED.is_set():
            raise KeyboardInterrupt
        return bool(until is not None and until())

    return check


def clear() -> None:
    _REQUESTED.clear()


def install() -> dict[int, Any]:
    """Handle SIGINT and SIGTERM with :func:`stop_requested`; the handlers they had, to restore."""
    return {s: signal.signal(s, stop_requested) for s in SIGNALS}


def restore(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)
