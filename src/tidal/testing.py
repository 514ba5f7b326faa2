"""Helpers for testing pipelines, UDFs, sources and sinks: the rig Tidal's own tests use.

Ships with the package, as httpx ships ``MockTransport`` and bytewax ``TestingSource``: users
writing a UDF, a source or a sink test it against the real thing — real SQLite buffers in a
temporary directory, the real reader and writer code, a real Spark query when they want one —
without copying Tidal's set-up.

* :class:`ManualClock` — time as a value that a test advances (``clock.advance(5)``), for the
  controller (``Controller.tick(clock.now)``) and the scaling core.
* :class:`BufferRig` — a run directory with SQLite buffers and the control record; builds the
  :class:`~tidal.spark.batch.config.QueryConfig` of a vertex query, fills buffers, reads them back,
  and sets replicas as the controller would.
* :func:`run_pipeline` — a whole pipeline on Spark until a condition holds (or a timeout).
* :func:`delivered` — the records a file sink committed, as dicts.

    >>> clock = ManualClock(100.0)
    >>> clock.advance(2.5)
    102.5
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tidal.isb.base import Buffer
from tidal.isb.control import ControlStore
from tidal.isb.sqlite import SqliteStore
from tidal.scaling.limits import BufferLimits
from tidal.spark.batch.config import QueryConfig
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import Limits, PipelineSpec
from tidal.spec.model import SinkSpec, SourceSpec, UdfSpec

__all__ = ["BufferRig", "ManualClock", "delivered", "ids_of", "run_pipeline"]


class ManualClock:
    """Seconds as a float that only moves when told to."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def __call__(self) -> float:  # usable wherever a ``clock: Callable[[], float]`` is taken
        return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError(f"time does not go back ({seconds} s)")
        self._now += seconds
        return self._now


class BufferRig:
    """A run directory with real SQLite buffers and a control record, for vertex-level tests.

    >>> import tempfile
    >>> with BufferRig(tempfile.mkdtemp()) as rig:
    ...     _ = rig.fill("in", 3)
    ...     rig.ids("in")
    ['m0', 'm1', 'm2']
    """

    def __init__(self, run_dir: str | Path, *, pipeline: str = "t") -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.db = self.run_dir / "pipeline.db"
        self.pipeline = pipeline
        self.store = SqliteStore(self.db)
        self.control = ControlStore(self.db)

    def buffer(self, name: str, max_length: int = 50_000, usage_limit: float = 0.8) -> Buffer:
        """The buffer ``name``, created if needed."""
        return self.store.create(name, BufferLimits(max_length, usage_limit))

    def fill(self, name: str, n: int, *, start: int = 0, tag: str = "m") -> Buffer:
        """Append ``n`` messages with ids ``<tag><i>`` and payloads ``p<i>``, from ``i = start``."""
        buffer = self.buffer(name)
        numbers = range(start, start + n)
        buffer.append([f"p{i}".encode() for i in numbers], [f"{tag}{i}" for i in numbers])
        return buffer

    def ids(self, name: str, after: int = 0, limit: int = 1_000_000) -> list[str]:
        """The ids stored in ``name`` (not yet trimmed), in order."""
        return [message_id for _, message_id, _ in self.store.open(name).read(after, limit)]

    def set_replicas(self, vertex: str, replicas: int) -> None:
        """What the controller does: the vertex's reader uses it at its next micro-batch."""
        self.control.set_replicas(vertex, replicas)

    def config(
        self,
        vertex: str = "v",
        *,
        input: str | None = "in",
        outputs: Sequence[str] = ("out",),
        limits: Limits | None = None,
        source: SourceSpec | None = None,
        udf: UdfSpec | None = None,
        sink: SinkSpec | None = None,
        routes: Sequence[tuple[str, tuple[str, ...]] | None] = (),
    ) -> QueryConfig:
        """The configuration of ``vertex``'s query over this rig's buffers (``routes``: each
        output's conditions, ``(operator, values)``, as :mod:`tidal.spec.routing` has them)."""
        return QueryConfig(
            pipeline=self.pipeline,
            vertex=vertex,
            db=str(self.db),
            run_dir=str(self.run_dir),
            input=input,
            outputs=tuple(outputs),
            limits=limits,
            source=source,
            udf=udf,
            sink=sink,
            routes=tuple(routes),
        )

    def close(self) -> None:
        self.store.close()
        self.control.close()

    def __enter__(self) -> BufferRig:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_pipeline(
    spec: PipelineSpec,
    run_dir: str | Path,
    *,
    until: Callable[[PipelineRun], bool],
    timeout: float = 120.0,
    spark: Any = None,
    trigger_seconds: float = 0.2,
) -> PipelineRun:
    """Run ``spec`` on Spark until ``until(run)`` holds, then stop it; raises ``TimeoutError``
    (after stopping) when it does not within ``timeout`` seconds, and the pipeline's own error
    when a vertex fails. Returns the stopped run (its control record is closed; read results
    from the run directory)."""
    run = PipelineRun(spec, run_dir, spark=spark, trigger_seconds=trigger_seconds)
    deadline = time.monotonic() + timeout
    with run:
        while not until(run):
            run.check()
            if time.monotonic() > deadline:
                raise TimeoutError(f"pipeline {spec.name!r}: condition not met within {timeout:g} s")
            time.sleep(0.2)
    return run


def delivered(path: str | Path) -> list[dict[str, Any]]:
    """The records a ``file`` sink committed, in order (:func:`tidal.spark.sinks.files.read_file_sink`)."""
    from tidal.spark.sinks.files import read_file_sink

    return read_file_sink(path)


def ids_of(records: Iterable[dict[str, Any]]) -> list[str]:
    return [str(r["id"]) for r in records]
