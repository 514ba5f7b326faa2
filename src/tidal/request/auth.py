"""The HTTP source's bearer token (``source.http.auth.token``, Numaflow's HTTP source auth).

The token is read when a process of the request path starts, from the file or the environment
variable the spec names (:class:`~tidal.spec.http.TokenSpec`): never from the spec itself, and
never passed on a command line (where ``ps`` shows it). The activator checks every request on
the public address; a receiver checks the requests it takes on the public address while the
activator is out of the path (those the activator forwards were checked there). Without the
header: 401; with another token: 403; both are counted and nothing is stored.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from aiohttp import web

from tidal import errors

__all__ = ["bearer_ok", "load_token", "refused"]


def load_token(file: str | None, env: str | None, field: str = "source.http.auth.token") -> str | None:
    """The token from ``file`` or the variable ``env`` (None: no auth). Raises ``ValueError``
    naming ``field`` and where it looked when the token is missing or empty."""
    if file is None and env is None:
        return None
    if file is not None:
        path = Path(file)
        if not path.is_file():
            raise errors.SpecError(f"{field}.file", f"{file} does not exist", "write the token there")
        token = path.read_text().strip()
        where = f"the file {file}"
    else:
        assert env is not None
        token = os.environ.get(env, "").strip()
        where = f"the environment variable {env}"
    if not token:
        raise errors.SpecError(field, f"{where} is empty", "put the token in it")
    return token


def bearer_ok(header: str, token: str) -> bool:
    """``Authorization: Bearer <token>`` with this token (compared in constant time)."""
    if not header.lower().startswith("bearer "):
        return False
    return hmac.compare_digest(header[7:].strip().encode(), token.encode())


def refused(request: web.Request, token: str | None) -> web.Response | None:
    """401 or 403 for a request without this token; None when it may go on."""
    if token is None:
        return None
    header = request.headers.get("Authorization", "")
    if not header.lower().startswith("bearer "):
        return web.json_response(
            {"error": "this source needs the header Authorization: Bearer <token>"},
            status=401,
            headers={"WWW-Authenticate": 'Bearer realm="tidal"'},
        )
    if not bearer_ok(header, token):
        return web.json_response({"error": "the bearer token is not this source's"}, status=403)
    return None
