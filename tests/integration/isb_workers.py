"""Code run in child processes by the buffer tests (importable, so 'spawn' can pickle it)."""

from __future__ import annotations

import sys
from pathlib import Path


def open_store(kind: str, where: str):
    if kind == "sqlite":
        from tidal.isb.sqlite import SqliteStore

        return SqliteStore(Path(where))
    from tidal.isb.jetstream import JetStreamStore

    return JetStreamStore(where, "conformance")


def write_batches(kind: str, where: str, buffer: str, writer: str, batches: int, size: int) -> int:
    store = open_store(kind, where)
    buf = store.open(buffer)
    written = 0
    for b in range(batches):
        ids = [f"{writer}-{b}-{i}" for i in range(size)]
        written += buf.append([b"x" * 100] * size, ids).appended
    store.close()
    return written


def write_forever(kind: str, where: str, buffer: str, size: int, keyed: bool = False) -> None:
    """Append batches (``keyed``: with ``append_batch``) until killed; prints each batch number
    once it is stored."""
    store = open_store(kind, where)
    buf = store.open(buffer)
    b = 0
    while True:
        ids = [f"k{b}-{i}" for i in range(size)]
        if keyed:
            buf.append_batch(f"batch-{b}", ids, [b"y" * 100] * size)
        else:
            buf.append([b"y" * 100] * size, ids)
        b += 1
        sys.stdout.write(f"{b}\n")
        sys.stdout.flush()
        if buf.stats().length > buf.limits.max_length - size:
            buf.commit(buf.last_seq())


if __name__ == "__main__":
    write_forever(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:] == ["keyed"])
