"""How the request path's processes run: on uvloop, until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any

__all__ = ["run", "until_stopped"]


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
