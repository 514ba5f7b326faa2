"""What connectors' clients share, below the sources, the sinks and the query runtime.

- ``${NAME}`` in a connector's settings (Kafka's ``consumer`` and ``producer``) is read from the
  environment when the client is built, and never logged (:func:`expand_env`).
- pynumaflow's handlers may be ``async``: Spark's workers are synchronous, so each worker process
  keeps one event loop to run them on (:func:`run_async`), made on first use.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
from typing import Any

from tidal import errors

__all__ = ["bases", "built", "call", "collect", "expand_env", "run_async"]

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_loop: asyncio.AbstractEventLoop | None = None  # one per worker process, for async handlers


def expand_env(value: Any, where: str) -> Any:
    """``value`` with every ``${NAME}`` replaced by the environment's ``NAME`` (``where`` names the
    setting in the error when it is not set)."""
    if not isinstance(value, str):
        return value

    def lookup(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in os.environ:
            raise errors.SpecError(where, f"${{{name}}} is not set in the environment", f"export {name}=…")
        return os.environ[name]

    return _ENV.sub(lookup, value)


def nats_servers(settings: dict[str, Any], where: str) -> dict[str, Any]:
    """``nats.connect``'s servers and credentials from a NATS or JetStream source's settings:
    ``url`` (several, comma-separated) and ``user``/``password``/``token`` with ``${NAME}``
    expanded from the environment (``where``: the spec's path, named when one is not set)."""
    auth = {
        key: expand_env(settings[key], f"{where}.{key}")
        for key in ("user", "password", "token")
        if settings.get(key) is not None
    }
    return {"servers": [u.strip() for u in settings["url"].split(",")], **auth}


def run_async(coro: Any) -> Any:
    """Run ``coro`` to its end on the worker's one loop."""
    global _loop  # noqa: PLW0603 - the worker's one loop, made on first use
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop.run_until_complete(coro)


async def collect(stream: Any) -> list[Any]:
    """What an async generator yields, as a list."""
    return [message async for message in stream]


def call(result: Any) -> Any:
    """A handler's result, awaited on the worker's loop if it is awaitable."""
    return run_async(result) if inspect.isawaitable(result) else result


def bases(obj: object) -> set[str]:
    """The qualified names of ``obj``'s classes (itself if it is one): how a pynumaflow handler
    class is recognised without importing pynumaflow."""
    kind = obj if isinstance(obj, type) else type(obj)
    return {f"{c.__module__}.{c.__qualname__}" for c in kind.__mro__}


def built(obj: Any, path: str) -> Any:
    """``obj`` if it is a handler, or built with no arguments if it is a class, as Numaflow's
    examples build theirs before handing them to the server; ``path`` names the spec field."""
    if not isinstance(obj, type):
        return obj
    try:
        return obj()
    except TypeError as exc:
        why = f"{obj.__name__}() needs arguments ({exc}); name an instance instead"
        raise TypeError(f"{path}: {why}") from None
