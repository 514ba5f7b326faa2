"""The activator of an HTTP source (``pkg/activator``, ``spec/knative.md`` §3.4, §4).

``python -m tidal.request.activator CONFIG_JSON`` owns the source's public address (127.0.0.1 and
the configured port). Every request arrives here.

* **In the path** (no receiver ready, or the KPA's excess burst capacity is negative, or
  ``targetBurstCapacity: -1``): the request waits in the :class:`~tidal.request.throttler.Throttler`
  for a receiver with room — bounded in count (``maxHeld``, then 503) and in time
  (``holdTimeoutSeconds``, then 503) — and is forwarded with ``K-Proxy-Request: activator``.
  The activator's own statistics count it from arrival, so held requests count as load.
* **At zero**: the first request pokes the run at once (a UDP datagram on loopback); the run
  ticks the controller without waiting for the next interval, and the KPA sees the held requests.
* **Out of the path** (EBC ≥ 0 with receivers ready): the request is forwarded round robin with
  no capacity bookkeeping and no statistics here; the receivers' queue-proxies count it and
  enforce their own ``containerConcurrency``.

Where Tidal differs from Knative, on purpose: on one host there is no ingress to re-point, so
"out of the path" still crosses this process — what leaves the path is the throttler (the
per-request capacity accounting, the hold queue, the statistics), which is what Knative's
activator adds. On many hosts, a load balancer in front of the receivers would take the
activator's place when it is out of the path (``docs/http.md``).

The run talks to it on ``/_tidal/``: ``PUT /_tidal/receivers`` (the ready receivers and whether
to stay in the path) and ``GET /_tidal/stats`` (the one-second report, Knative's push).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp
from aiohttp import web

from tidal.request.breaker import Overloaded
from tidal.request.receiver import PROXY_HEADER
from tidal.request.throttler import Throttler, policy_name
from tidal.scaling.request_stats import RequestStats

__all__ = ["ActivatorConfig", "main"]

READY_LINE = "TIDAL-ACTIVATOR"
FORWARDED = ("Content-Type", "Idempotency-Key", "X-Message-Id")
POKE_EVERY = 0.2  # seconds between pokes while requests wait at zero


@dataclass(frozen=True, slots=True)
class ActivatorConfig:
    vertex: str
    host: str = "127.0.0.1"
    port: int = 0
    container_concurrency: int = 0
    max_held: int = 10_000
    hold_timeout: float = 30.0
    max_request_bytes: int = 1 << 20
    poke_port: int = 0  # the run's UDP port on 127.0.0.1; 0: do not poke

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def _error(status: int, problem: str) -> web.Response:
    return web.json_response({"error": problem}, status=status, headers={"Retry-After": "1"})


class _Activator:
    def __init__(self, config: ActivatorConfig) -> None:
        self.config = config
        self.throttler = Throttler(config.container_concurrency, config.max_held)
        self.in_path = True
        self.stats = RequestStats(time.monotonic())
        self.first_sent = False  # the immediate {1, 1} of a first request, subtracted next report
        self.session: aiohttp.ClientSession | None = None
        self._round = itertools.count()
        self._last_poke = 0.0
        self._poker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rejected = 0  # 503s: too many held, or held too long
        self.longest_wait = 0.0  # the longest a request waited for a receiver this period

    def _poke(self) -> None:
        now = time.monotonic()
        if self.config.poke_port and now - self._last_poke >= POKE_EVERY:
            self._last_poke = now
            self.first_sent = True
            # The run gone or not listening: its next tick sees the held requests anyway.
            with contextlib.suppress(OSError):
                self._poker.sendto(self.config.vertex.encode(), ("127.0.0.1", self.config.poke_port))

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            limit = self.config.max_request_bytes
            return web.json_response(
                {"error": f"body is above maxRequestBytes {limit}: split the batch"}, status=413
            )
        headers = {h: request.headers[h] for h in FORWARDED if h in request.headers}
        if not self.in_path and self.throttler.trackers:
            trackers = self.throttler.trackers
            url = trackers[next(self._round) % len(trackers)].url
            return await self._forward(url, body, headers)
        arrived = time.monotonic()
        self.stats.enter(arrived, proxied=True)
        try:
            if not self.throttler.trackers:
                self._poke()
            try:
                async with self.throttler.slot(self.config.hold_timeout) as tracker:
                    self.longest_wait = max(self.longest_wait, time.monotonic() - arrived)
                    headers[PROXY_HEADER] = "activator"
                    return await self._forward(tracker.url, body, headers)
            except Overloaded as exc:
                self.rejected += 1
                return _error(503, f"activator: {exc}")
            except TimeoutError:
                self.rejected += 1
                return _error(
                    503,
                    f"activator: no receiver had room within holdTimeoutSeconds "
                    f"({self.config.hold_timeout:g})",
                )
        finally:
            self.stats.leave(time.monotonic(), proxied=True)

    async def _forward(self, url: str, body: bytes, headers: dict[str, str]) -> web.Response:
        assert self.session is not None
        try:
            async with self.session.post(url, data=body, headers=headers) as answer:
                payload = await answer.read()
                out = {k: answer.headers[k] for k in ("Content-Type", "Retry-After") if k in answer.headers}
                return web.Response(status=answer.status, body=payload, headers=out)
        except (aiohttp.ClientError, OSError) as exc:
            return _error(502, f"activator: the receiver failed ({type(exc).__name__}: {exc}); retry with "
                          "the same Idempotency-Key: messages it stored are not stored twice")  # fmt: skip

    async def receivers(self, request: web.Request) -> web.Response:
        update = await request.json()
        self.throttler.update([str(u) for u in update["receivers"]])
        self.in_path = bool(update.get("in_path", True))
        return web.json_response({"ok": True})

    async def stats_handler(self, request: web.Request) -> web.Response:
        stat = self.stats.report(time.monotonic()).to_dict()
        wait, self.longest_wait = self.longest_wait, 0.0
        if self.first_sent:  # the poke already reported one request: do not count it twice
            stat["concurrency"] = max(stat["concurrency"] - 1.0, 0.0)
            stat["rps"] = max(stat["rps"] - 1.0 / max(stat["period"], 1.0), 0.0)
            self.first_sent = False
        return web.json_response(
            {
                **stat,
                "held": self.throttler.waiting,
                "in_flight": self.stats.concurrency,
                "in_path": self.in_path or not self.throttler.trackers,
                "receivers": len(self.throttler.trackers),
                "capacity": self.throttler.capacity,
                "policy": policy_name(self.config.container_concurrency),
                "rejected": self.rejected,
                "longest_wait": wait,
            }
        )


def activator_app(config: ActivatorConfig) -> web.Application:
    activator = _Activator(config)
    app = web.Application(client_max_size=config.max_request_bytes)
    app.router.add_post("/", activator.handle)
    app.router.add_put("/_tidal/receivers", activator.receivers)
    app.router.add_get("/_tidal/stats", activator.stats_handler)

    async def session(app: web.Application) -> Any:
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        activator.session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=None, sock_connect=2.0)
        )
        yield
        await activator.session.close()

    app.cleanup_ctx.append(session)
    return app


async def _serve(config: ActivatorConfig) -> None:
    runner = web.AppRunner(activator_app(config), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, backlog=2048, reuse_address=True)
    await site.start()
    print(f"{READY_LINE} {runner.addresses[0][1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    raw = json.loads(args[0])
    config = ActivatorConfig(**raw)
    try:
        import uvloop

        uvloop.run(_serve(config))
    except ImportError:  # pragma: no cover
        asyncio.run(_serve(config))


if __name__ == "__main__":
    main()
