"""Keep PySpark's per-task garbage collection cheap in the Python workers that run Tidal's code.

PySpark's daemon runs ``gc.collect()`` after every task a reused Python worker finishes (and
its runners after every call). A full collection walks every object the garbage collector
tracks, and a worker that has imported pyarrow, the pipeline's spec models and the user's UDF
module holds enough of them that each collection cost 70–80 ms here: with a handful of tasks per
micro-batch per vertex that was most of a core on 2 cores (``docs/benchmarks.md``).

:func:`freeze_imports` moves everything alive at that moment (modules, classes, functions, the
per-process store caches) into the collector's permanent generation, once per process. Later
collections walk only what was created since, which is what a task leaves behind; what it
frees by reference counting (Arrow arrays, payload lists) never needed the collector anyway.
The cost: a reference cycle that is garbage at the moment of freezing is kept for the life of
the process, once.
"""

from __future__ import annotations

import gc
import os

__all__ = ["freeze_imports"]

_frozen_in: set[int] = set()  # the pids that froze (a forked child freezes again)


def freeze_imports() -> None:
    """Freeze the objects alive now into the GC's permanent generation, once per process."""
    pid = os.getpid()
    if pid not in _frozen_in:
        gc.collect()  # what is already garbage goes first, rather than being kept for good
        gc.freeze()
        _frozen_in.add(pid)
