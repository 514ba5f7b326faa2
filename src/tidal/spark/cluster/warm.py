"""New executors warmed before their first micro-batch: a tiny job as soon as they register.

An executor's first Python task starts its Python daemon (the interpreter and the imports of
:mod:`tidal.spark.query.daemon`), forks a worker that imports pyarrow and the step's module, and
runs the JVM's task path for the first time: 4–5 s on a loaded 2-core box, where a warm task of
the same micro-batch takes a fraction of a second. Whichever query's task lands there first pays
it, in the middle of a wave. On the cluster's waves (2026-12-07) a pre-scaled wave found two
executors registered 20 s before it and idle, and still the source's first two micro-batches
took 4 and 5.5 s (53 and 500 orders), one on each new executor, while 9,000 orders piled up;
mid-wave, a task of the source that landed on a just-registered executor stalled it 5 s.

So when executors register, :class:`ExecutorWarmer` runs one job of one task per registered
core (Spark offers free cores round-robin, and tasks without a preferred location go to the first
offers: every free core, the new executors' among them, gets one). Each task imports pyarrow and
the pipeline's step modules (:func:`step_modules`); the worker that ran it goes back to the
executor's pool and the next task there, a vertex's, reuses it warm (``spark.python.worker.reuse``,
on by default). A task on an executor that was warm already takes milliseconds.

The job is a DataFrame's ``mapInArrow``, not an RDD's ``mapPartitions``: Spark keys an executor's
Python daemons by the job's environment, which holds the job's artifact session (a SQL job's is
the Spark session's, an RDD job's none), so an RDD warm-up started daemons that no vertex used.
Seen on the cluster's waves (two daemons under every executor, the warm-up's and the vertices')
and held by ``tests/integration/test_warm_executors.py``.

The job runs in the scheduler pool ``tidal-warm`` (the vertices' queries run in pools named after
them), from one thread, one job at a time: executors that register while one runs are warmed by
the next. A warm-up that fails (the context stopping, an executor lost) is logged and forgotten:
the vertex's own first task warms the executor as before. What it costs: a task per core per
registration, and an executor's "first task done" in ``executors.jsonl`` is now usually the
warm-up's (registration to warm, not to the vertex's first batch).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["ExecutorWarmer", "step_modules", "warm_worker"]

log = logging.getLogger("tidal.executors")

POOL = "tidal-warm"
SCHEMA = "host string, daemon long, seconds double"


def warm_worker(modules: tuple[str, ...], batches: Iterator[Any]) -> Iterator[Any]:
    """One warm-up task, on the executor (``mapInArrow``): what a vertex's task imports after
    the fork. Yields where it ran (host, the pid of the Python daemon that forked this worker)
    and its seconds."""
    began = time.perf_counter()
    import pyarrow as pa  # the Arrow batches every Python step reads and writes

    for _ in batches:
        pass
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # a step's module the executor cannot import fails the vertex's task, not this
            continue
    seconds = time.perf_counter() - began
    yield pa.RecordBatch.from_pydict(
        {"host": [socket.gethostname()], "daemon": [os.getppid()], "seconds": [seconds]}
    )


def step_modules(spec: Any) -> tuple[str, ...]:
    """The modules of the pipeline's Python steps' functions (``module:function`` references,
    or a function's ``__module__``: a builtin's), sorted; SQL and DataFrame steps have none."""
    out: set[str] = set()
    for v in spec.vertices:
        if v.udf is None or v.udf.engine != "python":
            continue
        ref = v.udf.function
        name = ref.split(":", 1)[0] if isinstance(ref, str) else getattr(ref, "__module__", None)
        if name and name != "__main__":
            out.add(name)
    return tuple(sorted(out))


class ExecutorWarmer:
    """Runs the warm-up job (module docstring) after :meth:`joined`, on a thread of its own."""

    def __init__(self, spark: Any, modules: Iterable[str]) -> None:
        self._spark = spark
        self._sc = spark.sparkContext
        self._modules = tuple(modules)
        self._cores = 0
        self._wanted = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.jobs = 0  # warm-up jobs run to the end
        self.daemons: set[tuple[str, int]] = set()  # (host, pid) of the Python daemons they ran in

    def start(self) -> ExecutorWarmer:
        self._thread = threading.Thread(target=self._run, name="tidal-warm", daemon=True)
        self._thread.start()
        return self

    def joined(self, cores: int) -> None:
        """Executors registered; ``cores`` are all the registered executors' cores now."""
        with self._lock:
            self._cores = cores
        self._wanted.set()

    def stop(self) -> None:
        self._stop.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        self._sc.setLocalProperty("spark.scheduler.pool", POOL)
        self._sc.setJobDescription("tidal: warm new executors' Python workers")
        while True:
            self._wanted.wait()
            if self._stop.is_set():
                return
            self._wanted.clear()
            with self._lock:
                cores = self._cores
            if cores <= 0:
                continue
            began = time.monotonic()
            try:
                ran = [
                    (r.host, r.daemon, r.seconds)
                    for r in self._spark.range(0, cores, 1, cores)
                    .mapInArrow(functools.partial(warm_worker, self._modules), SCHEMA)
                    .collect()
                ]
            except Exception as exc:  # the context stopping, an executor lost mid-task
                if self._stop.is_set():
                    return
                log.info("warming new executors did not finish (%s): their first tasks warm them", exc)
                continue
            daemons = sorted({(host, pid) for host, pid, _ in ran})
            with self._lock:
                self.daemons.update(daemons)
                self.jobs += 1
            log.info(
                "warmed the Python workers of %d executors in %.1f s (%d tasks, the slowest %.1f s)",
                len(daemons), time.monotonic() - began, len(ran), max(s for _, _, s in ran),
            )  # fmt: skip
