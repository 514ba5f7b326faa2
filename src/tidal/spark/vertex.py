"""One vertex = one Structured Streaming query: its input buffer → (transform) → its output buffer.

The wiring lives here once, so every caller gets the same options (the input buffer to read and
trim, the output buffer, the vertex name the control record is keyed by, admission per replica,
a processing-time trigger so an idle vertex does not spin, and its checkpoint).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tidal.spark.datasource import SCHEMA

__all__ = ["start_vertex"]


def start_vertex(
    spark: Any,
    *,
    db: str | Path,
    vertex: str,
    source: str,
    sink: str,
    checkpoint: str | Path,
    read_batch_size: int = 500,
    transform: Callable[[Iterator[Any]], Iterator[Any]] | None = None,
    trigger_seconds: float = 0.5,
) -> Any:
    """Start the query of ``vertex`` and return its ``StreamingQuery``.

    ``transform`` is an Arrow batch function (``mapInArrow``) that keeps the buffer schema
    (``seq``, ``id``, ``payload``); without one, messages are copied as they are.
    """
    frame = (
        spark.readStream.format("tidal_buffer")
        .option("db", str(db))
        .option("buffer", source)
        .option("vertex", vertex)
        .option("readBatchSize", str(read_batch_size))
        .load()
    )
    if transform is not None:
        frame = frame.mapInArrow(transform, SCHEMA)
    return (
        frame.writeStream.format("tidal_buffer")
        .option("db", str(db))
        .option("out", sink)
        .option("in", source)
        .option("vertex", vertex)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{int(trigger_seconds * 1000)} milliseconds")
        .queryName(vertex)
        .start()
    )
