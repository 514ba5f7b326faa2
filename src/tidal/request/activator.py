"""The activator of an HTTP source (``pkg/activator``, ``spec/knative.md`` §3.4, §4).

``python -m tidal.request.activator CONFIG_JSON`` owns the source's public address (127.0.0.1 and
the configured port). Every request arrives here.

* **In the path** (no receiver ready, or the KPA's excess burst capacity is negative, or
  ``targetBurstCapacity: -1``): the request waits in the :class:`~tidal.request.throttler.Throttler`
  for a receiver with room — bounded in count (``maxHeld``, then 503) and in time
  (``holdTimeoutSeconds``, then 503) — and is forwarded with ``K-Proxy-Request: activator``.
  The activator's own statistics count it from arrival, so held requests count as load.
* **The first request after a quiet period** is reported at once as concurrency 1 (Knative's
  concurrency reporter, :class:`~tidal.scaling.request_stats.ConcurrencyReporter`): a UDP datagram
  on loopback carries it to the run, which records it and ticks the controller without waiting
  for the next interval; the next one-second report subtracts it. **At zero**, requests that keep
  waiting poke the run again (a tick, no statistic) every ``POKE_EVERY`` seconds.
* **Out of the path** (EBC ≥ 0 with receivers ready): requests do not cross this process. On one
  host Tidal realises Knative's re-pointed ingress with ``SO_REUSEPORT``: every serving receiver
  also listens on the public port, the receivers open theirs first, then the activator closes
  its own, and the kernel spreads new connections over the receivers. A request that still
  arrives here (a keep-alive connection opened while in the path) is forwarded round robin
  without the throttler, and its connection is closed so the client reconnects to a receiver.
  Back into the path, the activator opens its listener first, then the receivers close theirs.
  On many hosts, a load balancer in front of the receivers takes the kernel's place
  (``docs/http.md``).

**A receiver that takes no connection** (refused, or no answer to the handshake within 2 s: dead,
or its host gone) never saw the request, so the activator sends it once more through the
throttler, to another receiver, and sets that one aside for ``SET_ASIDE_SECONDS`` (the run calls a
dead receiver gone within that). Knative's activator answers 502 there and leaves the retry to
the client; a request that reached its receiver is never sent twice (its answer, or a 502).

The run talks to it on a private loopback port (``/_tidal/``, refused on the public one):
``PUT /_tidal/receivers`` (the ready receivers, whether to stay in the path, the names of
every activator of the source, and the receivers just found dead: requests in flight to them
end at once with a 502 the client retries) and ``GET /_tidal/stats`` (the one-second report, Knative's push).

**Several activators** (``source.http.activators``) share the public port (``SO_REUSEPORT``, the
kernel spreads connections over them, as a Service spreads them over Knative's activator pods).
Each infers its index from its own name's place among the sorted names (Knative's
``inferIndex`` on the activators' addresses) and balances over its slice of the receivers with
that slice's capacity (``assignSlice``, :mod:`tidal.request.subsetting`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp
from aiohttp import web

from tidal.request import subsetting
from tidal.request.auth import load_token, refused
from tidal.request.breaker import Overloaded
from tidal.request.messages import EVENT_TIME, KEYS, NUMAFLOW_ID, NUMAFLOW_PATH, wrong_vertex
from tidal.request.receiver import PROXY_HEADER
from tidal.request.serving import PublicListener, local_port, run, until_stopped
from tidal.request.throttler import Throttler, policy_name
from tidal.scaling.request_stats import ConcurrencyReporter, RequestStat

__all__ = ["CANNOT_LISTEN", "ActivatorConfig", "main"]

READY_LINE = "TIDAL-ACTIVATOR"
CANNOT_LISTEN = "TIDAL-ACTIVATOR-CANNOT-LISTEN"  # on stderr: the public address is not ours, or taken
FORWARDED = ("Content-Type", "Idempotency-Key", "X-Message-Id", NUMAFLOW_ID, EVENT_TIME, KEYS)
POKE_EVERY = 0.2  # seconds between pokes while requests wait at zero
SET_ASIDE_SECONDS = 5.0  # a receiver that took no connection sits out this long
UNSENT = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)  # the request never left


class _Unsent(Exception):
    """No connection to the receiver: it never saw the request, so it may go to another."""


@dataclass(frozen=True, slots=True)
class ActivatorConfig:
    vertex: str
    alias: str = ""  # the other name a POST to /vertices/<name> may give (an HTTP MonoVertex's)
    name: str = "activator-00"  # its place among the source's sorted activator names is its index
    host: str = "127.0.0.1"
    port: int = 0
    container_concurrency: int = 0
    max_held: int = 10_000
    hold_timeout: float = 30.0
    max_request_bytes: int = 1 << 20
    poke_port: int = 0  # the run's UDP port on 127.0.0.1; 0: do not poke
    token_file: str | None = None  # source.http.auth.token: where the token is read (never the token)
    token_env: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def _error(status: int, problem: str) -> web.Response:
    return web.json_response({"error": problem}, status=status, headers={"Retry-After": "1"})


class _Activator:
    def __init__(self, config: ActivatorConfig) -> None:
        self.config = config
        self.throttler = Throttler(config.container_concurrency, config.max_held)
        self.in_path = True
        self.reporter = ConcurrencyReporter()
        self.session: aiohttp.ClientSession | None = None
        self._round = itertools.count()
        self._last_poke = 0.0
        self._poker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.public = PublicListener(config.host, config.port)  # closed while out of the path
        self.admin_port = 0
        self.rejected = 0  # 503s: too many held, or held too long
        self.longest_wait = 0.0  # the longest a request waited for a receiver this period
        self.sent_to: dict[str, int] = {}  # requests forwarded through the throttler, per receiver
        self.token = load_token(config.token_file, config.token_env)
        self.unauthorized = 0  # 401s and 403s: no token, or another one
        self.posts: dict[str, set[asyncio.Task[web.Response]]] = {}  # forwards in flight, per receiver
        self.known: list[str] = []  # the ready receivers, as the run last said
        self.aside: dict[str, float] = {}  # receivers that took no connection → until when they sit out
        self.resent = 0  # requests sent to another receiver after one took no connection

    def _poke(self, stat: bool) -> None:
        """Tell the run now: ``stat`` carries the immediate {concurrency 1, one request} of a
        first request; without it, a wake-up tick for requests held at zero (rate-limited)."""
        now = time.monotonic()
        if not self.config.poke_port or (not stat and now - self._last_poke < POKE_EVERY):
            return
        self._last_poke = now
        held = not self.throttler.trackers
        message = json.dumps({"vertex": self.config.vertex, "stat": stat, "held": held}).encode()
        # The run gone or not listening: its next tick sees the held requests anyway.
        with contextlib.suppress(OSError):
            self._poker.sendto(message, ("127.0.0.1", self.config.poke_port))

    async def handle(self, request: web.Request) -> web.Response:
        denied = refused(request, self.token)
        if denied is not None:
            self.unauthorized += 1
            return denied
        elsewhere = wrong_vertex(request.match_info.get("vertex"), self.config.vertex, self.config.alias)
        if elsewhere is not None:
            return web.json_response({"error": elsewhere}, status=404)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            limit = self.config.max_request_bytes
            return web.json_response(
                {"error": f"body is above maxRequestBytes {limit}: split the batch"}, status=413
            )
        headers = {h: request.headers[h] for h in FORWARDED if h in request.headers}
        if not self.in_path and self.throttler.trackers:
            # Out of the path, on a connection opened while it was in: forward without the
            # throttler, and close the connection so the client's next one reaches a receiver.
            trackers = self.throttler.trackers
            url = trackers[next(self._round) % len(trackers)].url
            direct = await self._forward(url, body, headers)
            assert direct is not None  # without may_retry it always answers
            direct.force_close()
            return direct
        arrived = time.monotonic()
        if self.reporter.request_in(arrived):
            self._poke(stat=True)
        try:
            if not self.throttler.trackers:
                self._poke(stat=False)
            try:
                for attempt in (1, 2):  # a receiver that takes no connection: once more, elsewhere
                    async with self.throttler.slot(self.config.hold_timeout) as tracker:
                        self.longest_wait = max(self.longest_wait, time.monotonic() - arrived)
                        headers[PROXY_HEADER] = "activator"
                        self.sent_to[tracker.url] = self.sent_to.get(tracker.url, 0) + 1
                        answer = await self._forward(tracker.url, body, headers, may_retry=attempt == 1)
                    if answer is not None:
                        return answer
                    self.resent += 1
                raise AssertionError("unreachable: the second attempt always answers")
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
            self.reporter.request_out(time.monotonic())

    async def _forward(
        self, url: str, body: bytes, headers: dict[str, str], *, may_retry: bool = False
    ) -> web.Response | None:
        """The receiver's answer; a 502 when it fails, or when the run reports it dead while the
        request is in flight (a lost host answers nothing, not even a reset: without the cut the
        request would wait for TCP to give up, many minutes). ``None`` when no connection could
        be made and ``may_retry``: the receiver is set aside and the caller sends it elsewhere."""
        post = asyncio.ensure_future(self._post(url, body, headers))
        posts = self.posts.setdefault(url, set())
        posts.add(post)
        try:
            return await post
        except _Unsent as exc:
            self.set_aside(url)
            if may_retry:
                return None
            return _error(502, f"activator: no connection to the receiver {url} ({exc}); retry with the "
                          "same Idempotency-Key")  # fmt: skip
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the client went away: nothing to answer
            # Only cut() cancels the post alone.
            problem = f"the receiver {url} was lost mid-request (its host is gone)"
            return _error(502, f"activator: {problem}; retry with the same Idempotency-Key: what it "
                          "stored is not stored twice")  # fmt: skip
        finally:
            posts.discard(post)
            if not posts:
                self.posts.pop(url, None)

    def set_aside(self, url: str) -> None:
        """A receiver that took no connection: out of the balancing for ``SET_ASIDE_SECONDS``
        (the run calls a dead one gone within that), then back unless the run dropped it."""
        self.aside[url] = time.monotonic() + SET_ASIDE_SECONDS
        self._balance()

    def _balance(self) -> None:
        now = time.monotonic()
        self.aside = {u: until for u, until in self.aside.items() if until > now and u in self.known}
        self.throttler.update([u for u in self.known if u not in self.aside])

    def cut(self, lost: list[str]) -> None:
        """The run found these receivers dead: end the requests in flight to them now."""
        for url in lost:
            for post in list(self.posts.get(url, ())):
                post.cancel()

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> web.Response:
        assert self.session is not None
        try:
            async with self.session.post(url, data=body, headers=headers) as answer:
                payload = await answer.read()
                out = {k: answer.headers[k] for k in ("Content-Type", "Retry-After") if k in answer.headers}
                return web.Response(status=answer.status, body=payload, headers=out)
        except UNSENT as exc:  # no connection: the receiver never saw the request
            raise _Unsent(f"{type(exc).__name__}: {exc}") from None
        except (aiohttp.ClientError, OSError) as exc:
            return _error(502, f"activator: the receiver failed ({type(exc).__name__}: {exc}); retry with "
                          "the same Idempotency-Key: messages it stored are not stored twice")  # fmt: skip

    def _admin(self, request: web.Request) -> bool:
        return local_port(request) == self.admin_port

    async def receivers(self, request: web.Request) -> web.Response:
        if not self._admin(request):
            raise web.HTTPNotFound()
        update = await request.json()
        self.known = [str(u) for u in update["receivers"]]
        self._balance()
        self.cut([str(u) for u in update.get("lost", [])])
        names = sorted(str(n) for n in update.get("activators", [self.config.name]))
        self.throttler.set_activators(max(1, len(names)), subsetting.infer_index(names, self.config.name))
        # Never out of the path with no receiver: someone must hold the public port.
        in_path = bool(update.get("in_path", True)) or not self.throttler.trackers
        if in_path:
            await self.public.listen(True)  # open before the receivers close theirs
        self.in_path = in_path
        if not in_path:
            await self.public.listen(False)  # the receivers opened theirs first
        return web.json_response({"ok": True, "in_path": self.in_path})

    async def stats_handler(self, request: web.Request) -> web.Response:
        if not self._admin(request):
            raise web.HTTPNotFound()
        now = time.monotonic()
        report = self.reporter.report(now)  # the immediate report of a first request subtracted
        stat = report.to_dict() if report is not None else RequestStat(now, 0.0, 0.0, 0.0, 0.0, 0.0).to_dict()
        wait, self.longest_wait = self.longest_wait, 0.0
        return web.json_response(
            {
                **stat,
                "held": self.throttler.waiting,
                "in_flight": self.reporter.in_flight,
                "in_path": self.in_path or not self.throttler.trackers,
                "receivers": len(self.throttler.trackers),
                "assigned": len(self.throttler.assigned),
                "capacity": self.throttler.capacity,
                "policy": policy_name(self.config.container_concurrency),
                "rejected": self.rejected,
                "unauthorized": self.unauthorized,
                "resent": self.resent,
                "longest_wait": wait,
            }
        )


async def _slice_handler(activator: _Activator, request: web.Request) -> web.Response:
    """``GET /_tidal/slice``: this activator's index, its receivers and what it sent to each
    (read-only: the one-second report stays the scrape's)."""
    if not activator._admin(request):
        raise web.HTTPNotFound()
    t = activator.throttler
    return web.json_response(
        {
            "name": activator.config.name,
            "index": t.index,
            "activators": t.activators,
            "assigned": [tracker.url for tracker in t.assigned],
            "capacity": t.capacity,
            "sent_to": activator.sent_to,
        }
    )


def activator_app(config: ActivatorConfig) -> tuple[web.Application, _Activator]:
    activator = _Activator(config)
    app = web.Application(client_max_size=config.max_request_bytes)
    app.router.add_post("/", activator.handle)
    app.router.add_post(NUMAFLOW_PATH, activator.handle)  # where Numaflow's clients POST
    app.router.add_put("/_tidal/receivers", activator.receivers)
    app.router.add_get("/_tidal/stats", activator.stats_handler)

    async def slice_handler(request: web.Request) -> web.Response:
        return await _slice_handler(activator, request)

    app.router.add_get("/_tidal/slice", slice_handler)

    async def session(app: web.Application) -> Any:
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        activator.session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=None, sock_connect=2.0)
        )
        yield
        await activator.session.close()

    async def set_aside_ends(app: web.Application) -> Any:
        async def every_second() -> None:
            while True:
                await asyncio.sleep(1.0)
                if activator.aside:
                    activator._balance()  # those whose time is up come back

        task = asyncio.create_task(every_second())
        yield
        task.cancel()

    app.cleanup_ctx.append(session)
    app.cleanup_ctx.append(set_aside_ends)
    return app, activator


async def _serve(config: ActivatorConfig) -> None:
    app, activator = activator_app(config)
    runner = activator.public.runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    admin = web.TCPSite(runner, "127.0.0.1", 0)  # the run's: receivers, statistics
    await admin.start()
    activator.admin_port = admin_port = runner.addresses[0][1]
    try:
        await activator.public.listen(True)
    except OSError as exc:  # the run reads this line from the log and names the field
        reason = exc.strerror or exc
        print(f"{CANNOT_LISTEN} {config.host}:{config.port}: {reason}", file=sys.stderr, flush=True)
        await runner.cleanup()
        raise SystemExit(2) from None
    print(f"{READY_LINE} {admin_port} {activator.public.port}", flush=True)
    await until_stopped()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    raw = json.loads(args[0])
    config = ActivatorConfig(**raw)
    run(_serve(config))


if __name__ == "__main__":
    main()
