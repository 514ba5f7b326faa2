"""One replica of an HTTP source: a receiver process with Knative's queue-proxy in front of it.

``python -m tidal.request.receiver CONFIG_JSON`` serves, on its ``host`` (127.0.0.1 beside the driver;
a worker host's address when its agent started it, :mod:`tidal.request.agent`):

* ``POST /`` — messages (:mod:`tidal.request.messages`). The queue-proxy part comes first: the
  request is counted in the time-weighted statistics (proxied when ``K-Proxy-Request:
  activator``), then passes the breaker (``containerConcurrency`` > 0: at most CC at once, a queue
  of 10 × CC behind them, 503 "pending request queue full" beyond, 503 too when the request's
  deadline, ``timeoutSeconds``, passes while it waits, and 500 on any other breaker error, as
  Knative's ``ProxyHandler``; CC 0: no breaker). The handler appends the messages (with their
  event time and ``x-numaflow-keys``) to every output buffer of the source — with the other
  requests waiting at that moment, as one group commit (:mod:`tidal.request.group_commit`) — and answers
  200 with their ids **only after** the append committed. A buffer over its usage limit answers 429 with
  ``Retry-After`` before anything is written; a buffer that fills during the append answers 503
  — nothing half accepted: a retry with the same ``Idempotency-Key`` stores each message once.
* ``GET /_tidal/ready`` — Knative's queue probe: 200 "queue", 503 once draining.
* ``PUT /_tidal/serve`` — ``{"serve": true}`` while the activator is out of the path: listen on
  the public port too (``SO_REUSEPORT``); ``false`` to stop.
* ``GET /_tidal/stats`` — the last one-second report (concurrency, proxied concurrency, RPS,
  proxied RPS) and the messages accepted since start.

Once up it prints ``TIDAL-RECEIVER <port>`` on stdout. SIGTERM: fail readiness, finish what is
in flight, exit.

aiohttp (with uvloop) serves it: one library is both the server here and the activator's
proxying client, and both need keep-alive connection pools on loopback.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web

from tidal import errors
from tidal.isb.durability import DEFAULT, Durability
from tidal.isb.open import open_store
from tidal.request.auth import load_token, refused
from tidal.request.breaker import Breaker, Overloaded
from tidal.request.group_commit import Backpressure, GroupWriter
from tidal.request.messages import NUMAFLOW_PATH, BadRequest, parse, wrong_vertex
from tidal.request.serving import PublicListener, local_port, run, until_stopped
from tidal.scaling.request_stats import RequestStat, RequestStats

__all__ = ["PROXY_HEADER", "ReceiverConfig", "main", "receiver_app"]

PROXY_HEADER = "K-Proxy-Request"  # "activator" on requests the activator forwards
READY_LINE = "TIDAL-RECEIVER"


@dataclass(frozen=True, slots=True)
class ReceiverConfig:
    vertex: str
    pipeline: str
    outputs: tuple[str, ...]
    backend: str = "sqlite"
    db: str = ""
    url: str | None = None
    durability: Durability = DEFAULT  # buffers.durability: a 2xx only once the batch is on the disk
    container_concurrency: int = 0
    max_request_bytes: int = 1 << 20
    timeout_seconds: float = 300.0  # a request's deadline (Knative's revision timeoutSeconds)
    alias: str = ""  # the other name a POST to /vertices/<name> may give (an HTTP MonoVertex's)
    raw: bool = False  # source.http.bodies: raw, Numaflow's: the body is one message, as it came
    port: int = 0
    host: str = "127.0.0.1"  # the address of its own port (the activator forwards there)
    public_host: str = "127.0.0.1"
    public_port: int = 0  # the activator's public port, served directly while it is out of the path
    token_file: str | None = None  # source.http.auth.token: where the token is read (never the token)
    token_env: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ReceiverConfig:
        raw = json.loads(text)
        raw["outputs"] = tuple(raw["outputs"])
        return cls(**raw)


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


class _Receiver:
    def __init__(self, config: ReceiverConfig) -> None:
        self.config = config
        self.store = open_store(
            config.backend,
            db=config.db,
            pipeline=config.pipeline,
            url=config.url,
            durability=config.durability,
        )
        self.writer = GroupWriter([self.store.open(name) for name in config.outputs])
        cc = config.container_concurrency
        self.breaker = Breaker(10 * cc, cc) if cc > 0 else None
        self.stats = RequestStats(time.monotonic())
        self.last: RequestStat = self.stats.report(time.monotonic())  # the first is an empty stat
        self.accepted = 0
        self.refused = 0  # 503s: the breaker's queue was full, or a request's deadline passed in it
        self.inside = 0  # requests past the breaker now, and the most there ever were
        self.peak_inside = 0
        self.draining = False
        self.public = PublicListener(config.public_host, config.public_port)
        self.token = load_token(config.token_file, config.token_env)
        self.unauthorized = 0  # 401s and 403s on the public port (the activator checks its own)

    async def serve(self, request: web.Request) -> web.Response:
        """``{"serve": true}``: listen on the public port too (``SO_REUSEPORT``), the activator
        being out of the path; ``false``: stop (the activator listens again first)."""
        serve = bool((await request.json())["serve"]) and not self.draining
        await self.public.listen(serve and self.config.public_port != 0)  # 0: no public port to share
        return _json(200, {"serving": self.public.listening})

    async def handle(self, request: web.Request) -> web.Response:
        proxied = request.headers.get(PROXY_HEADER) == "activator"
        if self.config.public_port and local_port(request) == self.config.public_port:
            denied = refused(request, self.token)  # a client's own request, the activator out of the path
            if denied is not None:
                self.unauthorized += 1
                return denied
        self.stats.enter(time.monotonic(), proxied)
        try:
            answer = await self._admitted(request)
            if not self.public.listening and not proxied and local_port(request) == self.config.public_port:
                answer.force_close()  # back in the path: the client's next connection reaches the activator
            return answer
        finally:
            self.stats.leave(time.monotonic(), proxied)

    async def _admitted(self, request: web.Request) -> web.Response:
        """The queue-proxy's breaker (CC > 0), then the handler. Only the breaker's own errors
        are answered here (the handler's answer its own way): queue full or the deadline passed
        while queued → 503, anything else → 500 (Knative's ``ProxyHandler``)."""
        if self.breaker is None:
            return await self._inside(request)
        try:
            await self.breaker.acquire(self.config.timeout_seconds)
        except Overloaded:
            self.refused += 1
            return _json(503, {"error": "pending request queue full"}, {"Retry-After": "1"})
        except TimeoutError:
            self.refused += 1
            limit = self.config.timeout_seconds
            return _json(
                503, {"error": f"request deadline ({limit:g} s, timeoutSeconds) passed while queued"},
                {"Retry-After": "1"},
            )  # fmt: skip
        except Exception as exc:  # a breaker bug: say so, never hang or pass it over the limit
            return _json(500, {"error": f"queue-proxy breaker failed: {type(exc).__name__}: {exc}"})
        try:
            return await self._inside(request)
        finally:
            self.breaker.release()

    async def _inside(self, request: web.Request) -> web.Response:
        self.inside += 1
        self.peak_inside = max(self.peak_inside, self.inside)
        try:
            return await self._messages(request)
        finally:
            self.inside -= 1

    async def _messages(self, request: web.Request) -> web.Response:
        elsewhere = wrong_vertex(request.match_info.get("vertex"), self.config.vertex, self.config.alias)
        if elsewhere is not None:
            return _json(404, {"error": elsewhere})
        if request.content_length is not None and request.content_length > self.config.max_request_bytes:
            return self._too_large(request.content_length)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._too_large(None)
        try:
            parsed = parse(request.headers.get("Content-Type", ""), body, request.headers, self.config.raw)
        except BadRequest as bad:
            return _json(bad.status, {"error": bad.problem})
        try:
            stored = await self.writer.append(parsed.payloads, parsed.ids, parsed.event_time, parsed.keys)
        except Backpressure as full:
            return _json(429, {"error": str(full)}, {"Retry-After": "1"})
        except errors.BufferFull as full:
            return _json(
                503, {"error": f"{full}; nothing of this request was accepted"}, {"Retry-After": "1"}
            )
        # Unknown counts (a trimmed read-back) count as new: processed is a rate signal.
        self.accepted += stored.appended if stored.appended is not None else len(parsed.ids)
        return _json(200, {"accepted": stored.appended, "duplicates": stored.duplicates, "ids": parsed.ids})

    def _too_large(self, size: int | None) -> web.Response:
        limit = self.config.max_request_bytes
        got = f"{size} bytes" if size is not None else "more"
        return _json(413, {"error": f"body is {got}, above maxRequestBytes {limit}: split the batch"})

    async def ready(self, request: web.Request) -> web.Response:
        if self.draining:
            return web.Response(status=503, text="draining")
        return web.Response(text="queue")

    async def stats_handler(self, request: web.Request) -> web.Response:
        return _json(
            200,
            {
                **self.last.to_dict(),
                "accepted": self.accepted,
                "in_flight": self.stats.concurrency,
                "peak_inside": self.peak_inside,
                "refused": self.refused,
                "unauthorized": self.unauthorized,
            },
        )

    async def report_every_second(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.last = self.stats.report(time.monotonic())


def receiver_app(config: ReceiverConfig) -> tuple[web.Application, _Receiver]:
    receiver = _Receiver(config)
    app = web.Application(client_max_size=config.max_request_bytes)
    app.router.add_post("/", receiver.handle)
    app.router.add_post(NUMAFLOW_PATH, receiver.handle)  # where Numaflow's clients POST
    app.router.add_get("/_tidal/ready", receiver.ready)
    app.router.add_get("/_tidal/stats", receiver.stats_handler)
    app.router.add_put("/_tidal/serve", receiver.serve)

    async def reporter(app: web.Application) -> Any:
        task = asyncio.create_task(receiver.report_every_second())
        yield
        task.cancel()

    app.cleanup_ctx.append(reporter)
    return app, receiver


async def _serve(config: ReceiverConfig) -> None:
    app, receiver = receiver_app(config)
    runner = receiver.public.runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, backlog=1024)
    await site.start()
    port = runner.addresses[0][1]
    print(f"{READY_LINE} {port}", flush=True)
    await until_stopped()
    receiver.draining = True  # fail readiness and leave the public port first, then finish in flight
    await receiver.public.listen(False)
    await runner.cleanup()
    receiver.writer.close()
    receiver.store.close()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    config = ReceiverConfig.from_json(args[0])
    run(_serve(config))


if __name__ == "__main__":
    main()
