"""The ``nats`` source: a core NATS subject, queue-subscribed as Numaflow's ``nats`` source is.

``source: {nats: {url, subject, queue}}`` is staged as a user source is
(:mod:`tidal.spark.sources.staged`): the driver side subscribes once, on first use, to ``subject``
in the queue group ``queue`` (so every run subscribed with that group, like Numaflow's pods,
shares the subject and the server gives each message to one of them); the client holds what
arrives in memory, and each trigger moves up to what the replicas admit into the vertex's staging
buffer. Core NATS keeps nothing and redelivers nothing, so:

- **At most once into the pipeline.** ``ack`` has nothing to tell the server. A message the
  client holds and has not yet staged is lost when the process dies or the run stops, and a
  message published while no run is subscribed is lost: that is core NATS, and Numaflow's source
  loses the same ones (use the ``jetstream`` source for a stream that keeps them). Once staged, a
  message goes on exactly once, as every staged message does.
- **Ids** are a random prefix per subscription and a counter (Numaflow makes a UUID per message):
  unique across restarts, since the staging buffer stores each id once and would drop a repeat.
- **The memory is bounded**: the subscription holds at most :data:`MAX_HELD` messages or
  :data:`MAX_HELD_BYTES`; the server's messages past that are dropped by the client (a "slow
  consumer"), counted in :attr:`NatsSource.dropped` and logged; the staged reader adds them to
  the vertex's drops (``source-overflow``, :meth:`tidal.isb.batch_ledger.BatchLedger.drops`).
- **Pending** is what the client holds: Numaflow reports "not available" for NATS (the server
  keeps no backlog to ask about); the held messages are the one backlog there is, and they grow
  when the replicas fall behind, so the controller scales on them.
- A message's **source time** is when a read took it from the client (NATS messages carry none;
  Numaflow stamps the time it reads them too).

What Tidal does not do that Numaflow's does: TLS (``tls:``) and NKey authentication (refused by
the spec); ``user``/``password`` or ``token`` (``${NAME}`` from the environment) do work.
"""

from __future__ import annotations

import itertools
import json
import logging
import secrets
import time
from typing import Any

from tidal import contracts
from tidal.isb.background_loop import BackgroundLoop
from tidal.log import Repeated
from tidal.spark.batch.clients import nats_servers
from tidal.spark.batch.config import QueryConfig
from tidal.spark.sources.connector import SourceConnector
from tidal.spark.sources.staged import StagedSourceReader

__all__ = ["CONNECTOR", "NatsSource"]

log = logging.getLogger("tidal.source")
repeated = Repeated(log)

MAX_HELD = 100_000  # messages the client holds before it drops what the server sends
MAX_HELD_BYTES = 64 * 1024 * 1024
TIMEOUT = 10.0  # seconds to connect and subscribe


class NatsSource:
    """:class:`tidal.contracts.Source` over a core NATS queue subscription.

    Subscribes on first use: the reader is built (and pickled to the tasks) in processes that
    never read, and a subscription does not travel."""

    def __init__(self, settings: dict[str, Any], where: str, held: int = MAX_HELD) -> None:
        self.settings = settings  # the spec's fields, by their Python names
        self.where = where
        self.held = held
        self.dropped = 0  # messages the client dropped because it held `held` already
        self._nc: Any = None
        self._sub: Any = None
        self._prefix = ""
        self._count = itertools.count(1)

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "where": self.where, "held": self.held}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.settings, self.where, self.held = state["settings"], state["where"], state["held"]
        self.dropped, self._nc, self._sub = 0, None, None
        self._prefix, self._count = "", itertools.count(1)

    def _run(self, coro: Any, timeout: float = TIMEOUT) -> Any:
        return BackgroundLoop.get().run(coro, timeout)

    def _subscribe(self) -> None:
        if self._sub is not None and not self._nc.is_closed:
            return  # a connection that lost its server reconnects, and subscribes again, by itself
        self._run(self._open())

    async def _open(self) -> None:
        import nats

        s = self.settings
        self._nc = await nats.connect(
            connect_timeout=TIMEOUT,
            max_reconnect_attempts=-1,  # as Numaflow's: a subscriber that gives up receives nothing
            error_cb=self._error,
            **nats_servers(s, self.where),
        )
        self._sub = await self._nc.subscribe(
            s["subject"],
            queue=s["queue"],
            pending_msgs_limit=self.held,
            pending_bytes_limit=MAX_HELD_BYTES,
        )
        await self._nc.flush(TIMEOUT)  # the server has the subscription: what is published now comes
        self._prefix, self._count = secrets.token_hex(8), itertools.count(1)
        log.info("source %s: subscribed to %r in queue group %r", self.where, s["subject"], s["queue"])

    async def _error(self, exc: Exception) -> None:
        import nats.errors

        if isinstance(exc, nats.errors.SlowConsumerError):
            self.dropped += 1
            repeated.warning(
                (self.where, "dropped"),
                "source %s: the client holds %d messages already, dropped one from %r (%d dropped "
                "so far): the replicas do not keep up; raise scale.max",
                self.where,
                self.held,
                exc.subject,
                self.dropped,
            )
        else:
            repeated.warning((self.where, type(exc).__name__), "source %s: NATS: %s", self.where, exc)

    def read(self, n: int) -> list[tuple[str, bytes, float]]:
        """Up to ``n`` of the messages held: those held now, or the first to come within
        ``readTimeoutSeconds``; ``(prefix-counter, payload, time read)`` each."""
        self._subscribe()
        wait = float(self.settings.get("read_timeout_seconds") or 0.2)
        return list(self._run(self._take(n, wait), TIMEOUT + wait))

    async def _take(self, n: int, wait: float) -> list[tuple[str, bytes, float]]:
        import nats.errors

        try:  # wait only for the first message; then take what is held already
            messages = [await self._sub.next_msg(timeout=wait)]
        except nats.errors.TimeoutError:
            return []
        while len(messages) < n and self._sub.pending_msgs:
            messages.append(await self._sub.next_msg(timeout=None))
        now = time.time()
        return [(f"{self._prefix}-{next(self._count)}", bytes(m.data), now) for m in messages]

    def ack(self, offsets: Any) -> None:
        """Nothing to tell: core NATS does not redeliver (the messages were staged already)."""
        return None

    def pending(self) -> float | None:
        """The messages the client holds (the server keeps no backlog of a core subject)."""
        self._subscribe()
        return float(self._sub.pending_msgs)

    def close(self) -> None:
        """Leave the queue group (what the client holds is lost: at most once)."""
        if self._nc is not None and not self._nc.is_closed:
            self._run(self._nc.close())
        self._nc = self._sub = None


class NatsReader(StagedSourceReader):
    """The staged reader, closing the subscription when Spark stops the query: a reader process
    that outlived its query would otherwise keep taking its share of the group's messages."""

    def __init__(self, config: QueryConfig, source: NatsSource) -> None:
        super().__init__(config, contracts.check_source(source, source.where))
        self.nats = source

    def stop(self) -> None:
        self.nats.close()


class NatsConnector(SourceConnector):
    kind = "nats"
    guarantee = "at most once"  # core NATS keeps nothing: held and not yet staged is lost on a crash

    def reader(self, config: QueryConfig) -> NatsReader:
        assert config.source is not None and config.source.nats is not None
        settings = json.loads(config.source.nats.model_dump_json())
        return NatsReader(config, NatsSource(settings, f"vertices[{config.vertex}].source.nats"))


CONNECTOR = NatsConnector()
