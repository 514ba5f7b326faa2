"""The ``jetstream`` source: a NATS JetStream stream, read by a durable pull consumer (Numaflow's).

``source: {jetstream: {url, stream, consumer, deliverPolicy, filterSubjects}}`` reads the stream as
Numaflow's JetStream source does, and is staged as a user source is
(:mod:`tidal.spark.sources.staged`): at each trigger the driver side fetches up to what the
replicas admit, stores the messages in the vertex's staging buffer (synced under
``buffers.durability: sync``) and only then acknowledges them to the server. So:

- **Exactly once into the pipeline.** A message's id is its stream sequence. A crash between
  storing and acknowledging makes the server deliver the same messages again (after the
  consumer's ``ack_wait``, or at once to the restarted run), and the staging buffer stores each id
  once. Nothing is acknowledged before it is on Tidal's disk.
- **The consumer** is durable, named ``consumer`` or ``tidal-<pipeline>-<vertex>-<stream>``
  (Numaflow's is ``numaflow-…``), with ``AckPolicy.EXPLICIT``: each stored message is acknowledged
  on its own (sent together, the last one waited for). Not ``AckPolicy.ALL``, whose one
  acknowledgement per batch also acknowledges every earlier message still pending: a batch
  fetched by a run that died before storing it would be acknowledged by the next run's first
  batch, and lost (the power-cut test lost 300 messages that way). A restart goes on from what
  the consumer acknowledged. A consumer of that name that already exists is used as it is (its
  own filter, deliver policy and ack wait then hold), unless it acknowledges other than
  explicitly: that one is refused, with the fix in the message.
- **Pending** is the consumer's ``num_pending`` (in the stream, not yet delivered) plus
  ``num_ack_pending`` (delivered, not yet acknowledged): what Numaflow's source reports as its
  pending for scaling. A server that does not answer makes it "not available", and the controller
  leaves the vertex alone until it answers again.
- A message's **source time** is the time the stream stored it.

What Tidal does not do that Numaflow's does: TLS client certificates (``tls:``) and NKey
authentication; ``user``/``password`` or ``token`` (``${NAME}`` from the environment) do work.
"""

from __future__ import annotations

import json
from typing import Any

from tidal import contracts
from tidal.errors import SourceError
from tidal.isb.background_loop import BackgroundLoop
from tidal.spark.batch.clients import nats_servers
from tidal.spark.batch.config import QueryConfig
from tidal.spark.sources.connector import SourceConnector
from tidal.spark.sources.staged import StagedSourceReader

__all__ = ["CONNECTOR", "JetStreamSource"]

MAX_FETCH = 10_000  # messages per pull request: within the consumer's max_ack_pending
MAX_ACK_PENDING = 2 * MAX_FETCH
ACK_WAIT_SECONDS = 60.0  # a fetched batch not acknowledged by then is delivered again
TIMEOUT = 10.0  # seconds for a request to the server (info, create, acknowledge)


class JetStreamSource:
    """:class:`tidal.contracts.Source` over a JetStream durable pull consumer.

    Connects on first use: the reader is built (and pickled to the tasks) in processes that never
    read, and a connection does not travel."""

    def __init__(self, settings: dict[str, Any], consumer: str, where: str) -> None:
        self.settings = settings  # the spec's fields, by their Python names
        self.consumer = consumer
        self.where = where
        self._sub: Any = None
        self._nc: Any = None
        self._js: Any = None
        self._unacked: dict[str, Any] = {}  # id → its message, until acknowledged

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "consumer": self.consumer, "where": self.where}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.settings, self.consumer, self.where = state["settings"], state["consumer"], state["where"]
        self._sub = self._nc = self._js = None
        self._unacked = {}

    def _run(self, coro: Any, timeout: float = TIMEOUT) -> Any:
        return BackgroundLoop.get().run(coro, timeout)

    def _connect(self) -> None:
        if self._sub is not None and not self._nc.is_closed:
            return  # a connection that lost its server reconnects by itself
        self._run(self._open())

    async def _open(self) -> None:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
        from nats.js.errors import NotFoundError

        s = self.settings
        self._nc = await nats.connect(connect_timeout=TIMEOUT, **nats_servers(s, self.where))
        self._js = self._nc.jetstream(timeout=TIMEOUT)
        try:
            info = await self._js.consumer_info(s["stream"], self.consumer)
            _explicit(info.config.ack_policy, self.consumer, self.where)
        except NotFoundError:
            subjects = s.get("filter_subjects") or None
            await self._js.add_consumer(
                s["stream"],
                ConsumerConfig(
                    durable_name=self.consumer,
                    ack_policy=AckPolicy.EXPLICIT,
                    deliver_policy=DeliverPolicy(s.get("deliver_policy") or "all"),
                    ack_wait=ACK_WAIT_SECONDS,
                    max_ack_pending=MAX_ACK_PENDING,
                    filter_subjects=subjects if subjects and len(subjects) > 1 else None,
                    filter_subject=subjects[0] if subjects and len(subjects) == 1 else None,
                ),
            )
        self._sub = await self._js.pull_subscribe_bind(durable=self.consumer, stream=s["stream"])

    def read(self, n: int) -> list[tuple[str, bytes, float]]:
        """Up to ``n`` messages: whatever the consumer has now, or the first to come within
        ``fetchTimeoutSeconds``; ``(stream sequence, payload, stored time)`` each."""
        self._connect()
        wait = float(self.settings.get("fetch_timeout_seconds") or 0.2)
        return list(self._run(self._fetch(n, wait), TIMEOUT + wait))

    async def _fetch(self, n: int, wait: float) -> list[tuple[str, bytes, float]]:
        import nats.errors

        out: list[tuple[str, bytes, float]] = []
        while len(out) < n:
            ask = min(MAX_FETCH, n - len(out))
            try:
                messages = await self._sub.fetch(ask, timeout=wait)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            for m in messages:
                meta = m.metadata
                key = str(meta.sequence.stream)
                self._unacked[key] = m
                out.append((key, bytes(m.data), meta.timestamp.timestamp()))
            if len(messages) < ask:
                break  # the consumer has no more now
        return out

    def ack(self, offsets: Any) -> None:
        """Acknowledge each of ``offsets`` (``AckPolicy.EXPLICIT``), and wait for the server to
        have processed them (it handles one connection's messages in order, so the reply to the
        last one comes after the others)."""
        known = [self._unacked.pop(str(o)) for o in offsets if str(o) in self._unacked]
        if known:
            self._run(_ack_all(known), TIMEOUT * 2)

    def nack(self, offsets: Any) -> None:
        """Give back messages fetched and not stored (the staging append failed): a NAK each, so
        the server delivers them again now, not after ``ACK_WAIT_SECONDS``."""
        known = [self._unacked.pop(str(o)) for o in offsets if str(o) in self._unacked]
        if known:
            self._run(_nak_all(known, self._nc), TIMEOUT * 2)

    def pending(self) -> float | None:
        self._connect()
        info = self._run(self._js.consumer_info(self.settings["stream"], self.consumer))
        return float((info.num_pending or 0) + (info.num_ack_pending or 0))


async def _ack_all(messages: list[Any]) -> None:
    for m in messages[:-1]:
        await m.ack()
    await messages[-1].ack_sync(timeout=TIMEOUT)


async def _nak_all(messages: list[Any], nc: Any) -> None:
    for m in messages:
        await m.nak()
    await nc.flush(timeout=TIMEOUT)  # the NAKs reached the server before this returns


def _explicit(policy: Any, consumer: str, where: str) -> None:
    from nats.js.api import AckPolicy

    if policy not in (AckPolicy.EXPLICIT, None):
        named = getattr(policy, "value", policy)
        raise SourceError(
            f"{where}: the consumer {consumer!r} exists with ack_policy {named!r}; "
            "Tidal acknowledges each message once it is stored, which needs ack_policy 'explicit' "
            "('all' acknowledges messages a crashed run fetched and never stored; 'none' loses them "
            "on any crash). Delete the consumer (`nats consumer rm <stream> <consumer>`) and Tidal "
            "creates it, or name another in source.jetstream.consumer."
        )


def consumer_name(config: QueryConfig) -> str:
    """The durable consumer's name: the spec's, else ``tidal-<pipeline>-<vertex>-<stream>``."""
    assert config.source is not None and config.source.jetstream is not None
    spec = config.source.jetstream
    return spec.consumer or f"tidal-{config.pipeline}-{config.vertex}-{spec.stream}"


class JetStreamConnector(SourceConnector):
    kind = "jetstream"

    def reader(self, config: QueryConfig) -> StagedSourceReader:
        assert config.source is not None and config.source.jetstream is not None
        settings = json.loads(config.source.jetstream.model_dump_json())
        where = f"vertices[{config.vertex}].source.jetstream"
        source = JetStreamSource(settings, consumer_name(config), where)
        return StagedSourceReader(config, contracts.check_source(source, where))


CONNECTOR = JetStreamConnector()
