"""The queue-proxy's answers for its breaker's errors (Knative's ``ProxyHandler``): a request
whose deadline passes while it waits for a token gets 503, the queue full gets 503, and nothing
it carried is stored."""

from __future__ import annotations

import asyncio

from aiohttp.test_utils import TestClient, TestServer

from tidal.isb.sqlite import SqliteStore
from tidal.request.receiver import ReceiverConfig, receiver_app


def test_a_request_whose_deadline_passes_while_queued_gets_503_and_stores_nothing(tmp_path):
    db = str(tmp_path / "p.db")
    store = SqliteStore(db)
    store.create("in-out")

    async def story() -> tuple[int, str, int, int]:
        config = ReceiverConfig(
            vertex="in",
            pipeline="p",
            outputs=("in-out",),
            db=db,
            container_concurrency=1,
            timeout_seconds=0.2,
        )
        app, receiver = receiver_app(config)
        async with TestClient(TestServer(app)) as client:
            assert receiver.breaker is not None
            await receiver.breaker.acquire()  # the one token is taken: the next request queues
            answer = await client.post("/", json=[{"n": 1}], headers={"Idempotency-Key": "late"})
            body = await answer.json()
            receiver.breaker.release()
            ok = await client.post("/", json=[{"n": 2}], headers={"Idempotency-Key": "in-time"})
            return answer.status, body["error"], receiver.refused, ok.status

    status, error, refused, later = asyncio.run(story())
    assert status == 503 and "deadline" in error and "timeoutSeconds" in error
    assert refused == 1 and later == 200
    ids = [msg_id for _, msg_id, _ in store.open("in-out").read(0, 100)]
    assert ids == ["in-time/0"]
