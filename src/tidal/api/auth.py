"""Who may write to a running pipeline: a bearer token kept in the run directory.

The control API (:mod:`tidal.api.server`) changes a running pipeline — its replicas, its
lifecycle, its scale settings — so every write needs ``Authorization: Bearer <token>``. The
token is made once per run directory (:func:`ensure_token`: 32 random bytes, URL-safe, in
``RUN_DIR/api.token`` with mode 0600, so only its owner reads it) and kept across restarts, and
the CLI (``tidal scale``, ``pause``, ``resume``, ``apply``) reads it from there. Reads (``GET``)
need no token on loopback, where the dashboard is open too.

A write without the header is 401, with another token 403 (compared in constant time), and a
token in the query string is refused (400) whatever it holds: query strings end up in logs and
browser histories. Every refusal is logged with the caller's address.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs

from tidal import errors
from tidal.api.scale import ApiError

__all__ = [
    "TOKEN_FILE",
    "Caller",
    "check_token",
    "ensure_token",
    "read_token",
    "refuse_query_token",
]

TOKEN_FILE = "api.token"
_QUERY_KEYS = ("token", "access_token", "bearer", "auth", "authorization")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a write, as events record it: the peer address, the client's ``User-Agent`` and,
    when given, Kubernetes' ``fieldManager`` (``kubectl scale`` sends ``kubectl-scale``)."""

    address: str
    agent: str = ""
    manager: str | None = None

    def describe(self) -> str:
        name = self.manager or self.agent.split(" ", 1)[0] or "a client"
        return f"{name} at {self.address}"


def ensure_token(run_dir: Path) -> str:
    """The run directory's token, made (mode 0600) if it has none. A token file others may read is
    refused: it would let them write."""
    path = Path(run_dir) / TOKEN_FILE
    if path.exists() and path.stat().st_size == 0:
        # Made, then cut short before it reached the disk (a power cut): no client can hold it,
        # so a new one replaces it.
        path.unlink()
    if not path.exists():
        token = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
            f.flush()
            os.fsync(f.fileno())
        return token
    return read_token(run_dir)


def read_token(run_dir: Path) -> str:
    """The token of a run directory (for the CLI), refusing one that others may read."""
    path = Path(run_dir) / TOKEN_FILE
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist: is {run_dir} a run directory of a running `tidal run`?"
        )
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise PermissionError(
            f"{path} may be read by others (mode {mode:o}): run `chmod 600 {path}` (it lets whoever reads it "
            "change the pipeline)"
        )
    token = path.read_text().strip()
    if not token:
        raise errors.RunDirectoryError(
            str(path.parent),
            f"holds an empty token {path.name}",
            "delete it and start the run again to make a new one",
        )
    return token


def refuse_query_token(query: str, caller: Caller) -> None:
    """A token in the query string is refused, whatever it holds."""
    keys = {k.lower() for k in parse_qs(query, keep_blank_values=True)}
    found = [k for k in _QUERY_KEYS if k in keys]
    if found:
        raise ApiError(
            400,
            "BadRequest",
            f"a token in the query string ({found[0]}=…) is refused: it ends up in logs; send it as the "
            "header Authorization: Bearer <token>",
        )


def check_token(header: str | None, token: str | None) -> None:
    """401 without ``Authorization: Bearer …``, 403 with another token. ``token`` None: the run
    was started with ``--api-auth none`` (loopback only), so nothing is checked."""
    if token is None:
        return
    if not header or not header.lower().startswith("bearer "):
        raise ApiError(
            401,
            "Unauthorized",
            "this write needs the header Authorization: Bearer <token>; the token is in RUN_DIR/api.token "
            "(the tidal CLI sends it)",
        )
    given = header[7:].strip()
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise ApiError(403, "Forbidden", "the bearer token is not this run's (see RUN_DIR/api.token)")
