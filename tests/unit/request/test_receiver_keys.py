"""``x-numaflow-keys`` carried into the buffer: a real receiver app (aiohttp's test server) and
a real SQLite buffer; every message of a keyed request is stored with the request's keys, the
others with none, also when the group commit puts keyed and unkeyed requests in one append."""

from __future__ import annotations

import asyncio

from aiohttp.test_utils import TestClient, TestServer

from tidal.isb.sqlite import SqliteStore
from tidal.request.group_commit import GroupWriter
from tidal.request.receiver import ReceiverConfig, receiver_app


def stored_keys(buffer) -> dict[str, list[str] | None]:
    batch = buffer.read_batch(1, buffer.last_seq())
    return dict(zip(batch.column("id").to_pylist(), batch.column("keys").to_pylist(), strict=True))


def test_each_requests_keys_reach_the_buffer_with_every_one_of_its_messages(tmp_path):
    db = str(tmp_path / "p.db")
    store = SqliteStore(db, durability="os")
    store.create("in-out")
    requests = [
        ("a", [1, 2], {"x-numaflow-keys": "a"}),
        ("b", [3], {"X-Numaflow-Keys": " b , c ,"}),
        ("none", [4, 5], {}),
        ("empty", [6], {"x-numaflow-keys": ""}),
    ]

    async def story() -> list[int]:
        config = ReceiverConfig(vertex="in", pipeline="p", outputs=("in-out",), db=db)
        app, receiver = receiver_app(config)
        async with TestClient(TestServer(app)) as client:

            async def one(name: str, body: list[int], headers: dict[str, str]) -> int:
                answer = await client.post("/", json=body, headers={"Idempotency-Key": name, **headers})
                return answer.status

            statuses = await asyncio.gather(*(one(*r) for r in requests))
        receiver.writer.close()
        receiver.store.close()
        return list(statuses)

    assert asyncio.run(story()) == [200] * 4
    assert stored_keys(store.open("in-out")) == {
        "a/0": ["a"], "a/1": ["a"], "b/0": ["b", "c"], "none/0": None, "none/1": None, "empty/0": None,
    }  # fmt: skip
    store.close()


def test_one_group_holding_keyed_and_unkeyed_requests_keeps_each_ones_keys(tmp_path):
    store = SqliteStore(tmp_path / "b.db", durability="os")
    buffer = store.create("out")
    writer = GroupWriter([buffer])

    async def together() -> None:
        await asyncio.gather(
            writer.append([b"1"], ["x"], None, ["even"]),
            writer.append([b"2", b"3"], ["y", "z"], None),
            writer.append([b"4"], ["w"], 1663006726.0, ["odd", "two"]),
        )

    try:
        asyncio.run(together())
    finally:
        writer.close()
    assert stored_keys(buffer) == {"x": ["even"], "y": None, "z": None, "w": ["odd", "two"]}
    store.close()
