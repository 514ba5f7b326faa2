"""The group writer stores each request's ``x-numaflow-event-time`` as its messages' source time,
and the time they are stored for a request without one, in one append (a real SQLite buffer)."""

from __future__ import annotations

import asyncio
import time

from tidal.isb.sqlite import SqliteStore
from tidal.request.group_commit import GroupWriter


def test_a_groups_requests_keep_their_own_event_times(tmp_path):
    store = SqliteStore(tmp_path / "b.db", durability="os")
    buffer = store.create("out")
    writer = GroupWriter([buffer])

    async def both() -> None:
        await asyncio.gather(
            writer.append([b"a", b"b"], ["a", "b"], 1663006726.0),
            writer.append([b"c"], ["c"], None),
        )

    before = time.time()
    try:
        asyncio.run(both())
    finally:
        writer.close()
    batch = buffer.read_batch(1, buffer.last_seq())
    times = dict(zip(batch.column("id").to_pylist(), batch.column("t").to_pylist(), strict=True))
    assert times["a"] == times["b"] == 1663006726.0
    assert times["c"] >= before - 1
    store.close()
