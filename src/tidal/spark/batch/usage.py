"""What a task used: its Python worker's peak resident memory and its CPU time.

A PySpark Python worker runs one task at a time, so the worker's own counters are the task's:
at the start its peak resident set (``VmHWM``) is reset by writing ``5`` to
``/proc/self/clear_refs`` (Linux), and at the end ``VmHWM`` is the most the task held; the CPU is
``time.process_time()`` across the task. They feed the vertical recommendations
(:mod:`tidal.scaling.vertical`). Where ``/proc`` is missing (not Linux) or refuses the reset,
memory is unknown (None) and nothing else changes.
"""

from __future__ import annotations

import time

__all__ = ["TaskUsage"]


class TaskUsage:
    """``usage = TaskUsage()`` at a task's start; ``usage.end()`` → ``(peak bytes | None, cpu s)``."""

    __slots__ = ("_cpu", "_reset")

    def __init__(self) -> None:
        self._cpu = time.process_time()
        try:
            with open("/proc/self/clear_refs", "w") as refs:
                refs.write("5")
            self._reset = True
        except OSError:
            self._reset = False

    def end(self) -> tuple[float | None, float]:
        cpu = time.process_time() - self._cpu
        if not self._reset:
            return None, cpu
        try:
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return float(line.split()[1]) * 1024.0, cpu  # kB
        except OSError:
            pass
        return None, cpu
