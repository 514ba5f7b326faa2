"""Failpoints: this process SIGKILLed at a named step, so a test proves the step crash-safe.

A step that must survive a crash anywhere (a state move: :mod:`tidal.spark.run.repartition`)
calls :func:`failpoint` between its parts. With ``TIDAL_FAILPOINT=<name>`` in the environment,
the process kills itself there with SIGKILL: nothing flushed, no handler, no ``finally``, as
a power cut of the process, at an exact place rather than a timed one (a timed kill lands in
the longest part and rarely in the others). Unset, which is always outside the tests, it is one
dictionary lookup. The same idea as FoundationDB's buggify and etcd's gofail, reduced to a kill.

Names in use: ``move:recorded`` (the move is in the control store, the query still runs),
``move:stopped`` (the query stopped between batches, Spark not yet called),
``move:repartitioned`` (Spark's repartition returned, the count not yet saved), ``move:saved``
(the new count saved, the query not started), ``move:restarted`` (started, before its first
batch).
"""

from __future__ import annotations

import os
import signal

__all__ = ["ENV", "failpoint"]

ENV = "TIDAL_FAILPOINT"


def failpoint(name: str) -> None:
    """SIGKILL this process when ``TIDAL_FAILPOINT`` is ``name``."""
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
