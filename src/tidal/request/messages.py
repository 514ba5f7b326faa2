"""What a client POSTs to an HTTP source, turned into messages with ids — or refused whole.

Accepted bodies (the ``Content-Type`` decides):

* ``application/json``: one JSON value. An array is a batch (one message per element); anything
  else is one message.
* ``application/x-ndjson`` (also ``application/jsonl``, ``application/json-lines``): JSON lines,
  one message per non-empty line.

Each message's payload is its JSON text, compact (``{"a":1}``), UTF-8.

Ids make retries safe. With ``Idempotency-Key: K`` the messages are ``K/0``, ``K/1``, …; the
buffer stores each id once within its de-duplication window, so a retry of the same request
(same key, same body) appends nothing new and is answered with the same ids. ``X-Message-Id``
names a single message. Without either, ids are random and a retry is a new request.

A body that breaks any rule is refused whole with a 4xx that names the problem: nothing of it is
stored.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from tidal.errors import BadRequest

__all__ = ["JSON_LINES", "BadRequest", "Parsed", "parse"]

JSON_LINES = ("application/x-ndjson", "application/jsonl", "application/json-lines")
MAX_KEY_LENGTH = 200
_KEY = re.compile(r"^[\x21-\x7e]+$")  # visible ASCII, no spaces


@dataclass(frozen=True, slots=True)
class Parsed:
    payloads: list[bytes]
    ids: list[str]


def _compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _values(content_type: str, body: bytes) -> list[object]:
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        try:
            value = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequest(400, f"body is not valid JSON: {exc}") from None
        return list(value) if isinstance(value, list) else [value]
    if kind in JSON_LINES:
        values = []
        for number, line in enumerate(body.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                values.append(json.loads(line))
            except (ValueError, UnicodeDecodeError) as exc:
                raise BadRequest(400, f"line {number} is not valid JSON: {exc}") from None
        return values
    raise BadRequest(
        415,
        f"Content-Type {content_type or '(none)'} is not accepted: send application/json "
        "(one value, or an array for a batch) or application/x-ndjson (one JSON value per line)",
    )


def _key(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        return None
    if not value or len(value) > MAX_KEY_LENGTH or not _KEY.match(value):
        raise BadRequest(400, f"{name} must be 1–{MAX_KEY_LENGTH} visible ASCII characters without spaces")
    return value


def parse(content_type: str, body: bytes, headers: Mapping[str, str]) -> Parsed:
    """The request's messages and their ids, or :class:`BadRequest`."""
    values = _values(content_type, body)
    if not values:
        raise BadRequest(400, "the request holds no message (an empty array or no lines)")
    key = _key(headers, "Idempotency-Key")
    message_id = _key(headers, "X-Message-Id")
    if message_id is not None:
        if key is not None:
            raise BadRequest(400, "send Idempotency-Key or X-Message-Id, not both")
        if len(values) != 1:
            raise BadRequest(
                400, f"X-Message-Id names one message, and the body holds {len(values)}: "
                "use Idempotency-Key for a batch",
            )  # fmt: skip
        return Parsed([_compact(values[0])], [message_id])
    prefix = key if key is not None else uuid.uuid4().hex
    return Parsed([_compact(v) for v in values], [f"{prefix}/{i}" for i in range(len(values))])
