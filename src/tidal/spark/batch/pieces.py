"""How a task's input ranges are cut into pieces: the unit of an output append and of its key.

A piece is a fixed run of input sequences, each starting a whole number of steps into its range,
so a replay of the same range cuts the same pieces and writes the same de-duplication keys
(:mod:`tidal.spark.query.writer`). Readers that hand Spark the messages themselves read in the
same pieces (:class:`~tidal.spark.batch.readers.RowsReader`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from tidal.spark.batch.config import QueryConfig

__all__ = ["piece_size", "pieces"]

_MAX_PIECE = 8192  # input messages per output append (fewer when the buffers are small)


def piece_size(config: QueryConfig) -> int:
    """Input messages per output append: small enough that a piece fits an output buffer's
    usable room a few times over (an append is refused whole past ``bufferMaxLength``)."""
    return max(1, min(_MAX_PIECE, config.limits.usable_length // 4))


def pieces(tasks: Iterator[Any], step: int) -> Iterator[tuple[int, int, int, float]]:
    """The task rows' input ranges cut into pieces of at most ``step`` sequences, each starting
    a whole number of steps into its range (so a replay of the same range cuts the same pieces);
    with the Kafka partition each range is of (-1 for every other input) and the generator's
    clock start (NaN for every other input)."""
    for rows in tasks:
        names = rows.schema.names
        kparts = rows.column("kpart").to_pylist() if "kpart" in names else [-1] * rows.num_rows
        starts = rows.column("t0").to_pylist() if "t0" in names else [math.nan] * rows.num_rows
        for first, last, kpart, t0 in zip(
            rows.column("first").to_pylist(), rows.column("last").to_pylist(), kparts, starts, strict=True
        ):
            for a in range(first, last + 1, step):
                yield kpart, a, min(last, a + step - 1), t0
