"""How the request path's processes run: on uvloop, until SIGTERM or SIGINT, with the public
port they share."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any

from aiohttp import web

__all__ = ["PublicListener", "local_port", "run", "until_stopped"]


async def until_stopped() -> None:
    """Wait for SIGTERM or SIGINT (the run stops its children by PID with SIGTERM)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()


def run(main: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep working without it
        asyncio.run(main)
    else:
        uvloop.run(main)


def local_port(request: web.Request) -> int | None:
    """The port of ours the request came in on (which listener took the connection)."""
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    return None if sock is None else int(sock[1])


class PublicListener:
    """A source's public port, held with ``SO_REUSEPORT``: by the activator while it is in the
    path, by the serving receivers while it is out, and for a moment by both as it moves (the
    kernel spreads new connections over whoever holds it). ``port`` 0 takes a free port the
    first time it opens; the port it got is kept for the next time."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.runner: web.AppRunner | None = None  # set once the app's runner is set up
        self._site: web.TCPSite | None = None

    @property
    def listening(self) -> bool:
        return self._site is not None

    async def listen(self, on: bool) -> None:
        if on and self._site is None:
            assert self.runner is not None
            site = web.TCPSite(self.runner, self.host, self.port, backlog=2048, reuse_port=True)
            await site.start()
            self._site = site
            self.port = site.port  # the bound one: a port 0 asked for becomes the one the kernel gave
        elif not on and self._site is not None:
            await self._site.stop()
            self._site = None
