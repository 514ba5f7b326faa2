"""A receiver that takes no connection never saw the request: the activator sends it to another
receiver once, sets the dead one aside for SET_ASIDE_SECONDS, and takes it back after unless the
run dropped it. Real HTTP on loopback: the activator's app, a real receiver, a port nobody holds."""

from __future__ import annotations

import asyncio
import socket

from aiohttp.test_utils import TestClient, TestServer

from tidal.isb.sqlite import SqliteStore
from tidal.request import activator as activator_module
from tidal.request.activator import ActivatorConfig, activator_app
from tidal.request.receiver import ReceiverConfig, receiver_app


def test_a_request_for_a_receiver_that_takes_no_connection_goes_to_another_once(tmp_path, monkeypatch):
    monkeypatch.setattr(activator_module, "SET_ASIDE_SECONDS", 0.5)
    db = str(tmp_path / "p.db")
    SqliteStore(db).create("in-out")
    with socket.socket() as s:  # a port nothing listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/"

    async def story() -> tuple[list[int], int, bool, list[str]]:
        live_app, _ = receiver_app(ReceiverConfig(vertex="in", pipeline="p", outputs=("in-out",), db=db))
        async with TestServer(live_app) as live:
            app, activator = activator_app(ActivatorConfig(vertex="in"))
            async with TestClient(TestServer(app)) as client:
                activator.known = [dead, str(live.make_url("/"))]
                activator._balance()
                statuses = []
                for i in range(20):  # each request picks one of two at random until the dead one is aside
                    answer = await client.post("/", json=[{"n": i}], headers={"Idempotency-Key": f"k-{i}"})
                    statuses.append(answer.status)
                aside = dead in activator.aside
                await asyncio.sleep(1.6)  # past the set-aside: the run still lists it, so it is back
                back = [t.url for t in activator.throttler.trackers]
                return statuses, activator.resent, aside, back

    statuses, resent, aside, back = asyncio.run(story())
    assert statuses == [200] * 20 and resent == 1 and aside, (statuses, resent)
    assert dead in back
    ids = [msg_id for _, msg_id, _ in SqliteStore(db).open("in-out").read(0, 100)]
    assert sorted(ids) == sorted(f"k-{i}/0" for i in range(20))  # each once
