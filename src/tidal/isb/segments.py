"""Batches of messages as Arrow: the unit a buffer stores and the runtime moves.

A *segment* is one appended batch: consecutive sequences ``first..last`` whose ids, payloads and
source times travel as one Arrow record batch (``id string, payload binary, t double``, and
``keys list<string>``: Numaflow's message keys, null when a message has none), stored
as an Arrow IPC stream. ``t`` is the message's **source time** (seconds since the epoch: when its
source produced it, :mod:`tidal.scaling.latency`); a vertex's outputs keep their input's, so
the sink can tell how long a message took end to end.
The SQLite backend stores one file (and an index row) per segment instead of a row per
message, which removes the per-message B-tree write from the hot path (``docs/benchmarks.md``).
Reads hand back one record batch in :data:`READ_SCHEMA` (``seq`` added), so the runtime can keep
Arrow end to end.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from tidal.isb.base import Message

__all__ = [
    "KEYS",
    "READ_SCHEMA",
    "SEGMENT_SCHEMA",
    "as_segment",
    "decode",
    "empty",
    "encode",
    "first_unseen",
    "join",
    "messages",
    "no_keys",
    "times_now",
    "with_seqs",
]

KEYS = pa.list_(pa.string())  # a message's keys (Numaflow's): null when it has none
SEGMENT_SCHEMA = pa.schema(
    [("id", pa.string()), ("payload", pa.binary()), ("t", pa.float64()), ("keys", KEYS)]
)
READ_SCHEMA = pa.schema(
    [("seq", pa.int64()), ("id", pa.string()), ("payload", pa.binary()), ("t", pa.float64()), ("keys", KEYS)]
)


def times_now(n: int) -> pa.Array:
    """``n`` source times of now: for messages that enter the pipeline here."""
    import time

    return pa.repeat(pa.scalar(time.time(), pa.float64()), n)


def no_keys(n: int) -> pa.Array:
    """``n`` messages without keys."""
    return pa.nulls(n, KEYS)


def as_segment(
    ids: Sequence[str] | pa.Array,
    payloads: Sequence[bytes] | pa.Array,
    times: Sequence[float] | pa.Array | None = None,
    keys: Sequence[Sequence[str] | None] | pa.Array | None = None,
) -> pa.RecordBatch:
    """``ids``, ``payloads``, source ``times`` and ``keys`` (lists or Arrow arrays; times None:
    now; keys None: none) as one record batch in SEGMENT_SCHEMA."""
    id_array = ids if isinstance(ids, pa.Array) else pa.array(ids, pa.string())
    payload_array = payloads if isinstance(payloads, pa.Array) else pa.array(payloads, pa.binary())
    if id_array.type != pa.string():
        id_array = id_array.cast(pa.string())
    if payload_array.type != pa.binary():
        payload_array = payload_array.cast(pa.binary())
    if len(id_array) != len(payload_array):
        raise TypeError(f"append: {len(payload_array)} payloads but {len(id_array)} ids (one id per message)")
    if id_array.null_count or payload_array.null_count:
        raise TypeError("append: ids and payloads must not be null")
    if times is None:
        time_array = times_now(len(id_array))
    else:
        time_array = times if isinstance(times, pa.Array) else pa.array(times, pa.float64())
        if time_array.type != pa.float64():
            time_array = time_array.cast(pa.float64())
        if len(time_array) != len(id_array):
            raise TypeError(f"append: {len(time_array)} times but {len(id_array)} ids (one time per message)")
    if keys is None:
        key_array = no_keys(len(id_array))
    else:
        key_array = keys if isinstance(keys, pa.Array) else pa.array(keys, KEYS)
        if key_array.type != KEYS:
            key_array = key_array.cast(KEYS)
        if len(key_array) != len(id_array):
            raise TypeError(f"append: {len(key_array)} keys but {len(id_array)} ids (one list per message)")
    return pa.RecordBatch.from_arrays([id_array, payload_array, time_array, key_array], schema=SEGMENT_SCHEMA)


def encode(batch: pa.RecordBatch) -> pa.Buffer:
    """One segment as Arrow IPC stream bytes."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SEGMENT_SCHEMA) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def decode(blob: bytes | pa.Buffer) -> pa.RecordBatch:
    """The segment ``encode`` wrote (zero-copy over ``blob``)."""
    source = blob if isinstance(blob, pa.Buffer) else pa.py_buffer(blob)
    batch = pa.ipc.open_stream(source).read_next_batch()
    if batch.num_columns == 4:
        return batch
    # Written before source times (2 columns: unknown, NaN) or keys (3 columns: none) existed.
    n = batch.num_rows
    times = batch.column(2) if batch.num_columns > 2 else pa.repeat(pa.scalar(float("nan"), pa.float64()), n)
    return pa.RecordBatch.from_arrays(
        [batch.column(0), batch.column(1), times, no_keys(n)], schema=SEGMENT_SCHEMA
    )


def with_seqs(batch: pa.RecordBatch, first: int) -> pa.RecordBatch:
    """``batch`` (SEGMENT_SCHEMA) numbered from ``first``: a batch in READ_SCHEMA."""
    import numpy as np

    seqs = pa.array(np.arange(first, first + batch.num_rows, dtype=np.int64))
    return pa.RecordBatch.from_arrays(
        [seqs, batch.column(0), batch.column(1), batch.column(2), batch.column(3)], schema=READ_SCHEMA
    )


def empty() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=READ_SCHEMA)


def join(batches: Iterable[pa.RecordBatch]) -> pa.RecordBatch:
    """One record batch in READ_SCHEMA out of several (no copy for a single one)."""
    parts = [b for b in batches if b.num_rows]
    if not parts:
        return empty()
    if len(parts) == 1:
        return parts[0]
    return pa.concat_batches(parts)


def messages(batch: Any) -> list[Message]:
    """A READ_SCHEMA batch as ``(seq, id, payload)`` tuples (the protocol's ``read``)."""
    if batch.num_rows == 0:
        return []
    return list(
        zip(
            batch.column(0).to_pylist(),
            batch.column(1).to_pylist(),
            batch.column(2).to_pylist(),
            strict=True,
        )
    )


def first_unseen(batch: pa.RecordBatch, seen: set[str]) -> pa.RecordBatch:
    """The messages of ``batch`` whose id is not in ``seen``, each id once (its first), in order:
    what an append stores of a batch that repeats ids or holds ids stored before."""
    taken = set(seen)
    keep = []
    for message_id in batch.column("id").to_pylist():
        keep.append(message_id not in taken)
        taken.add(message_id)
    return batch.filter(pa.array(keep, pa.bool_()))
