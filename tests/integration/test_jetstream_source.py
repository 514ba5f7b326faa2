"""Numaflow's ``jetstream`` source, on a real nats-server: every stream message delivered once,
acknowledged only once stored, and a restart that goes on from the durable consumer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tidal import errors
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import parse_pipeline
from tidal.testing import delivered, ids_of

from .waits import eventually
from .zero_wake import SCALE_TO_ZERO, idles_to_zero_then_wakes

pytestmark = [pytest.mark.spark, pytest.mark.nats]


def _spec(url: str, stream: str, scale: dict | None = None) -> Any:
    return parse_pipeline(
        {
            "name": "js",
            "vertices": [
                {
                    "name": "in",
                    "source": {
                        "jetstream": {"url": url, "stream": stream, "filterSubjects": [f"{stream}.>"]}
                    },
                    **({"scale": scale} if scale else {}),
                },
                {"name": "up", "udf": {"map": "tidal.examples.udfs:upper"}},
                {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
            ],
            "edges": [{"from": "in", "to": "up"}, {"from": "up", "to": "out"}],
        }
    )


def _nats(url: str, work: Any) -> Any:
    async def go() -> Any:
        import nats

        nc = await nats.connect(url)
        try:
            return await work(nc.jetstream())
        finally:
            await nc.close()

    return asyncio.run(go())


def _publish(url: str, stream: str, first: int, last: int, *, create: bool = False) -> None:
    async def work(js: Any) -> None:
        if create:
            await js.add_stream(name=stream, subjects=[f"{stream}.>"])
        for n in range(first, last + 1):
            await js.publish(f"{stream}.orders", f"order {n}".encode())

    _nats(url, work)


def _consumer(url: str, stream: str) -> Any:
    async def work(js: Any) -> Any:
        return await js.consumer_info(stream, f"tidal-js-in-{stream}")

    return _nats(url, work)


def test_every_message_once_acknowledged_after_storing_and_a_restart_resumes(spark, nats_server, tmp_path):
    url, stream = nats_server.url, "orders1"
    _publish(url, stream, 1, 3000, create=True)
    out = tmp_path / "out.jsonl"

    def payloads() -> list[str]:
        return [r["payload"] for r in delivered(out)]

    def first_part() -> None:
        run.check()
        assert len(payloads()) >= 3000, len(payloads())
        info = _consumer(url, stream)
        assert (info.num_pending, info.num_ack_pending) == (0, 0), (info.num_pending, info.num_ack_pending)

    with PipelineRun(_spec(url, stream), tmp_path, spark=spark) as run:
        eventually(first_part, 240, "3,000 stream messages delivered and acknowledged")
        _publish(url, stream, 3001, 4000)  # some of these are read before the stop, some after
    _publish(url, stream, 4001, 5000)

    def everything() -> None:
        run.check()
        assert len(payloads()) >= 5000, len(payloads())

    with PipelineRun(_spec(url, stream), tmp_path, spark=spark) as run:
        eventually(everything, 240, "5,000 stream messages delivered across the restart")
    got = payloads()
    assert sorted(got) == sorted(f"ORDER {n}" for n in range(1, 5001))  # each once
    ids = ids_of(delivered(out))
    assert len(set(ids)) == len(ids) == 5000
    assert {i.rsplit(":", 1)[1] for i in ids} == {str(n) for n in range(1, 5001)}  # stream sequences
    info = _consumer(url, stream)
    assert (info.num_pending, info.num_ack_pending) == (0, 0)


def test_a_source_idled_to_zero_wakes_on_its_first_message_not_a_peek(spark, nats_server, tmp_path):
    """Idled to 0 under `tidal`, its query still asks the durable consumer's pending at every
    trigger: a message published at 0 wakes it at once (:mod:`.zero_wake`), each read once."""
    url, stream = nats_server.url, "wake"
    _publish(url, stream, 1, 200, create=True)

    def more() -> int:
        _publish(url, stream, 201, 500)
        return 300

    with PipelineRun(_spec(url, stream, SCALE_TO_ZERO), tmp_path, spark=spark) as run:
        idles_to_zero_then_wakes(run, tmp_path, "in", 200, more)
    info = _consumer(url, stream)
    assert (info.num_pending, info.num_ack_pending) == (0, 0)


def test_a_bad_stream_name_is_refused_naming_the_field():
    with pytest.raises(errors.SpecError, match=r"vertices\[0\]\.source\.jetstream\.stream"):
        parse_pipeline(
            {
                "name": "js",
                "vertices": [
                    {
                        "name": "in",
                        "source": {"jetstream": {"url": "nats://127.0.0.1:4222", "stream": "a.b"}},
                    },
                    {"name": "out", "sink": {"log": {}}},
                ],
                "edges": [{"from": "in", "to": "out"}],
            }
        )


def _source(url: str, stream: str, consumer: str) -> Any:
    from tidal.spark.sources.jetstream import JetStreamSource

    return JetStreamSource({"url": url, "stream": stream}, consumer, "vertices[0].source.jetstream")


def test_a_batch_a_crashed_run_fetched_and_never_stored_is_not_acknowledged_by_the_next_run(nats_server):
    """The power cut that lost 300 messages: run A fetches a batch and dies before storing it; run
    B fetches what came after and acknowledges it. Only B's messages may count as acknowledged: A's
    stay pending, for the server to deliver again once their ack wait runs out."""
    url, stream, consumer = nats_server.url, "crashed", "tidal-crashed"
    _publish(url, stream, 1, 5, create=True)
    crashed = _source(url, stream, consumer)
    assert [m[0] for m in crashed.read(5)] == ["1", "2", "3", "4", "5"]  # fetched, never stored
    _publish(url, stream, 6, 8)
    restarted = _source(url, stream, consumer)
    batch = restarted.read(100)
    assert [m[0] for m in batch] == ["6", "7", "8"]
    restarted.ack([m[0] for m in batch])

    async def work(js: Any) -> Any:
        return await js.consumer_info(stream, consumer)

    info = _nats(url, work)
    assert (info.num_pending, info.num_ack_pending) == (0, 5)
    assert info.ack_floor.stream_seq == 0  # nothing before the crashed batch's first message is acknowledged


def test_an_existing_consumer_that_acknowledges_all_at_once_is_refused_naming_the_fix(nats_server):
    from nats.js.api import AckPolicy, ConsumerConfig

    url, stream, consumer = nats_server.url, "ackall", "theirs"
    _publish(url, stream, 1, 3, create=True)

    async def work(js: Any) -> None:
        await js.add_consumer(stream, ConsumerConfig(durable_name=consumer, ack_policy=AckPolicy.ALL))

    _nats(url, work)
    with pytest.raises(errors.SourceError, match=r"'all'.*nats consumer rm.*source\.jetstream\.consumer"):
        _source(url, stream, consumer).read(3)


def test_a_batch_fetched_and_not_stored_is_nacked_and_delivered_again_at_once(nats_server):
    """What the staging append could not store is given back (``nack``, a NAK each): the server
    delivers it again now, not after the 60 s ack wait, with the same stream sequences."""
    url, stream, consumer = nats_server.url, "nacked", "tidal-nacked"
    _publish(url, stream, 1, 5, create=True)
    source = _source(url, stream, consumer)
    assert [m[0] for m in source.read(5)] == ["1", "2", "3", "4", "5"]
    assert source.read(5) == []  # held by the consumer for the ack wait: nothing to fetch
    source.nack(["1", "2", "3", "4", "5"])
    again = source.read(5)
    assert [m[0] for m in again] == ["1", "2", "3", "4", "5"]
    assert [m[1] for m in again] == [f"order {n}".encode() for n in range(1, 6)]
    source.ack([m[0] for m in again])
