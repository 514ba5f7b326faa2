"""The ``generator`` source: deterministic messages at a rate that follows a load shape.

Offsets are message numbers. ``total(t)`` of the load shape says how many are due ``t`` seconds
after the run's start (kept in the control record, so a restart continues the shape). A writer
task builds its messages from their numbers (:func:`generate`): message ``n`` always has the id
``n`` and the same payload, so a replay is exact.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from tidal.spark.batch import stores
from tidal.spark.batch.admission import Range
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.readers import RangeReader
from tidal.spark.sources.connector import SourceConnector

if TYPE_CHECKING:  # a task's read worker imports this module without the spec package (pydantic)
    from tidal.spec.shapes import LoadShape

__all__ = [
    "CONNECTOR",
    "GeneratorReader",
    "due_count",
    "due_times",
    "generate",
    "generator_payload",
    "generator_payloads",
    "generator_start",
    "numbered_payloads",
    "pending_now",
]


def _start_key(config: QueryConfig) -> str:
    return f"generator.{config.vertex}.start"


def generator_start(config: QueryConfig) -> float:
    """The wall-clock start of the generator's load shape (set once per run, kept over restarts)."""
    return float(stores.control(config).setdefault_meta(_start_key(config), repr(time.time())))


def due_count(config: QueryConfig, shape: LoadShape, elapsed: float) -> int:
    """How many messages the load shape made due ``elapsed`` seconds after its start (at most
    the generator's ``maxMessages``)."""
    assert config.source is not None and config.source.generator is not None
    due, most = shape.total(elapsed), config.source.generator.max_messages
    return due if most is None else min(due, most)


def generator_payload(vertex: str, n: int, size: int) -> bytes:
    """Message ``n``'s payload: its vertex and number, padded to ``size`` bytes."""
    head = f"{vertex} {n:012d} ".encode()
    return (head + b"." * max(0, size - len(head)))[:size] if size >= len(head) else head


def generator_payloads(vertex: str, first: int, last: int, size: int) -> Any:
    """Messages ``first..last``'s payloads as one Arrow binary array, built in Arrow's kernels:
    the same bytes as :func:`generator_payload`, at about a quarter of its cost per message."""
    import numpy as np
    import pyarrow as pa

    numbers = pa.array(np.arange(first, last + 1, dtype=np.int64)).cast(pa.string())
    return numbered_payloads(vertex, numbers, size)


def numbered_payloads(vertex: str, numbers: Any, size: int) -> Any:
    """The payloads of the messages whose numbers, as decimal strings, are ``numbers``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    head = pc.binary_join_element_wise(f"{vertex} ", pc.utf8_lpad(numbers, 12, "0"), " ", "")
    return pc.utf8_rpad(head, size, ".").cast(pa.binary())


def due_times(shape: LoadShape, start: float, first: int, last: int) -> Any:
    """Source times of messages ``first..last``: when the load shape made each one due. Exact at
    up to 33 points of the range and linear between them (the shape's integral is piecewise
    smooth; a bisection per message would cost more than making the message)."""
    import numpy as np

    grid = np.unique(np.linspace(first, last, num=min(33, last - first + 1)).round())
    at = np.array([shape.due_at(float(n)) for n in grid])
    return start + np.interp(np.arange(first, last + 1, dtype=np.float64), grid, at)


def generate(config: QueryConfig, first: int, last: int, start: float) -> Any:
    """The generator's messages ``first..last`` as one Arrow batch (``seq, id, payload, t``): the
    id is the message's number, the payload is built from that same string, and ``t`` is when
    the load shape made it due (its source time), the shape's clock having started at ``start``.

    ``start`` comes with the task (the reader's partitions carry it): a task on another host
    cannot read the control record on the driver's disk, and asking it for every piece was a
    write transaction each."""
    import numpy as np
    import pyarrow as pa

    assert config.source is not None and config.source.generator is not None
    g = config.source.generator
    numbers = pa.array(np.arange(first, last + 1, dtype=np.int64))
    ids = numbers.cast(pa.string())
    shape = g.load_shape()
    times = pa.array(due_times(shape, start, first, last), pa.float64())
    return pa.RecordBatch.from_arrays(
        [numbers, ids, numbered_payloads(config.vertex, ids, g.msg_size), times],
        names=["seq", "id", "payload", "t"],
    )


class GeneratorReader(RangeReader):
    """The generator: pending is what the load shape made due and is not yet admitted."""

    KEY = "n"

    def __init__(self, config: QueryConfig) -> None:
        super().__init__(config)
        assert config.source is not None and config.source.generator is not None
        self.shape = config.source.generator.load_shape()
        self.started: float | None = None

    def start(self) -> float:
        """When the load shape's clock started: at the first trigger (then kept over restarts),
        not when the pipeline was built: Spark's warm-up is no catch-up burst."""
        if self.started is None:
            self.started = generator_start(self.config)
        return self.started

    def due(self, now: float) -> int:
        return due_count(self.config, self.shape, now - self.start())

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        return {self.KEY: 0}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        """The ranges, each with the clock's start: the tasks make the source times from it."""
        t0 = self.start()
        return [replace(r, t0=t0) for r in super().partitions(start, end) if isinstance(r, Range)]

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
        due = self.due(time.time())
        n = start[self.KEY]
        stores.control(self.config).report_source(self.config.vertex, float(max(0, due - n)))
        return {self.KEY: self.admit(n, due)}

    def commit(self, end: dict[str, int]) -> None:
        return None  # nothing to trim: the numbers are the messages


def pending_now(config: QueryConfig) -> float | None:
    """What the load shape made due and the vertex has not processed (its committed batches),
    now; ``None`` before the shape's clock started (its first trigger). Processed plus this is
    exactly what arrived, whether the query runs a trigger or restarts: on the cluster's waves
    a woken source's query restarted for 8 s, its last report said 457 pending throughout, and
    `enrich` was sized for 900/s only once the next report came, with 7,300 waiting (2026-12-07)."""
    assert config.source is not None and config.source.generator is not None
    control = stores.control(config)
    start = control.meta(_start_key(config))
    if start is None:
        return None
    due = due_count(config, config.source.generator.load_shape(), time.time() - float(start))
    return float(max(0, due - control.processed(config.vertex)))


class GeneratorConnector(SourceConnector):
    """The driver plans message numbers due by the load shape; a task builds its range's messages."""

    kind = "generator"

    def driver_pending(self, config: QueryConfig) -> Callable[[], float | None]:
        """The shape's due count less what was processed (:func:`pending_now`): the driver knows it."""
        return functools.partial(pending_now, config)

    def reader(self, config: QueryConfig) -> GeneratorReader:
        return GeneratorReader(config)

    def read_range(self, config: QueryConfig, part: int, first: int, last: int, t0: float) -> Any:
        return generate(config, first, last, t0)


CONNECTOR = GeneratorConnector()
