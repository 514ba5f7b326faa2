"""Numaflow's core ``nats`` source, on a real nats-server: every message published while the
pipeline is subscribed arrives once; pending is what the client holds; a full client drops and
counts; a queue group shares the subject."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tidal.isb.natsd import NatsServer
from tidal.spark.run.pipeline import PipelineRun
from tidal.spark.sources.nats import NatsSource
from tidal.spec import parse_pipeline
from tidal.testing import delivered, ids_of

from .waits import eventually

pytestmark = [pytest.mark.nats]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A nats-server with its monitoring port (to see when a subscription is up), stopped by PID."""
    nats = NatsServer(tmp_path_factory.mktemp("nats"), monitor=True).start()
    try:
        yield nats
    finally:
        nats.stop()
        assert nats.proc is None


def _subscribed(server: NatsServer, subject: str, queue: str) -> int:
    """How many subscriptions the server holds on ``subject`` in ``queue``."""
    assert server.monitor_url is not None
    with urllib.request.urlopen(server.monitor_url.rstrip("/") + "/subsz?subs=1", timeout=5) as answer:
        subs = json.load(answer).get("subscriptions_list") or []
    return sum(1 for s in subs if s.get("subject") == subject and s.get("qgroup") == queue)


def _until_subscribed(server: NatsServer, subject: str, queue: str, count: int, run: Any = None) -> None:
    def check() -> None:
        if run is not None:
            run.check()
        assert _subscribed(server, subject, queue) == count

    eventually(check, 240, f"{count} subscription(s) to {subject!r} in queue group {queue!r}")


def _publish(url: str, subject: str, payloads: list[str]) -> None:
    async def go() -> None:
        import nats

        nc = await nats.connect(url)
        try:
            for p in payloads:
                await nc.publish(subject, p.encode())
            await nc.flush()
        finally:
            await nc.close()

    asyncio.run(go())


def _source(url: str, subject: str, queue: str = "tidal", held: int = 100_000) -> NatsSource:
    settings = {"url": url, "subject": subject, "queue": queue}
    return NatsSource(settings, "vertices[in].source.nats", held)


@pytest.mark.spark
def test_every_message_published_while_the_pipeline_runs_arrives_once(spark, server, tmp_path):
    subject, queue, n = "orders.new", "tidal-orders", 2000
    spec = parse_pipeline(
        {
            "name": "nats",
            "vertices": [
                {"name": "in", "source": {"nats": {"url": server.url, "subject": subject, "queue": queue}}},
                {"name": "up", "udf": {"map": "tidal.examples.udfs:upper"}},
                {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
            ],
            "edges": [{"from": "in", "to": "up"}, {"from": "up", "to": "out"}],
        }
    )
    out = tmp_path / "out.jsonl"

    def everything() -> None:
        run.check()
        got = len(delivered(out))
        assert got >= n, got

    with PipelineRun(spec, tmp_path, spark=spark) as run:
        _until_subscribed(server, subject, queue, 1, run)  # published before that would be lost

        def reported(value: float) -> None:  # a number, not Numaflow's "not available"
            report = run.control.source_report("in")
            assert report is not None and (report.pending, report.error) == (value, ""), report

        eventually(lambda: reported(0.0), 60, "the source's pending reported: nothing held")
        _publish(server.url, subject, [f"order {i}" for i in range(1, n + 1)])
        eventually(everything, 240, f"{n:,} published messages delivered")
        eventually(lambda: reported(0.0), 60, "the source's pending back to 0: all staged and processed")
    records = delivered(out)
    assert sorted(r["payload"] for r in records) == sorted(f"ORDER {i}" for i in range(1, n + 1))  # each once
    ids = ids_of(records)
    assert len(set(ids)) == len(ids) == n
    offsets = {i.rsplit(":", 1)[1] for i in ids}  # prefix-counter: one subscription, counted from 1
    assert {o.rsplit("-", 1)[1] for o in offsets} == {str(i) for i in range(1, n + 1)}
    _until_subscribed(server, subject, queue, 0)  # the stopped query's reader left the group


def test_pending_is_what_the_client_holds_and_a_read_takes_from_it(server):
    source = _source(server.url, "pending.held")
    try:
        assert source.pending() == 0  # subscribes: from now on the server sends it what is published
        _publish(server.url, "pending.held", [f"m{i}" for i in range(5)])

        def held() -> None:
            assert source.pending() == 5

        eventually(held, 60, "the client holds the 5 published messages")
        first = source.read(2)
        assert [m[1] for m in first] == [b"m0", b"m1"]
        assert source.pending() == 3
        rest = source.read(100)
        assert [m[1] for m in rest] == [b"m2", b"m3", b"m4"]
        assert source.pending() == 0 and source.read(10) == []  # nothing held: a short wait, then none
        offsets = [m[0] for m in first + rest]
        assert len(set(offsets)) == 5
        source.ack(offsets)  # nothing to tell the server, and nothing comes again
        assert source.read(10) == [] and source.dropped == 0
    finally:
        source.close()


def test_a_client_that_holds_its_limit_drops_what_comes_and_counts_it(server):
    source = _source(server.url, "pending.full", held=10)
    try:
        source.pending()
        _publish(server.url, "pending.full", [f"m{i}" for i in range(25)])

        def full() -> None:
            assert (source.pending(), source.dropped) == (10, 15)

        eventually(full, 60, "10 held and 15 dropped")
        assert [m[1] for m in source.read(100)] == [f"m{i}".encode() for i in range(10)]  # the first kept
    finally:
        source.close()


def test_a_queue_group_shares_the_subject_and_each_subscription_has_its_own_ids(server):
    """Two runs (or a run restarted while the old one lingered) in one group: each message goes to
    one of them, and their ids cannot collide in a staging buffer."""
    subject, queue = "shared.orders", "one-group"
    a, b = _source(server.url, subject, queue), _source(server.url, subject, queue)
    try:
        a.pending(), b.pending()
        _until_subscribed(server, subject, queue, 2)
        _publish(server.url, subject, [f"m{i}" for i in range(200)])

        def shared() -> None:
            assert a.pending() + b.pending() == 200

        eventually(shared, 60, "200 messages held between the two")
        got_a, got_b = a.read(1000), b.read(1000)
        assert got_a and got_b  # the server spread them (both empty-handed: 2**-199)
        assert sorted(m[1] for m in got_a + got_b) == sorted(f"m{i}".encode() for i in range(200))
        assert not {m[0] for m in got_a} & {m[0] for m in got_b}
    finally:
        a.close()
        b.close()
    _until_subscribed(server, subject, queue, 0)  # close() left the group
