"""What a client POSTs to an HTTP source, turned into messages with ids — or refused whole.

Accepted bodies (the ``Content-Type`` decides):

* ``application/json``: one JSON value. An array is a batch (one message per element); anything
  else is one message.
* ``application/x-ndjson`` (also ``application/jsonl``, ``application/json-lines``): JSON lines,
  one message per non-empty line.

Each message's payload is its JSON text, compact (``{"a":1}``), UTF-8.

Under ``bodies: raw`` (Numaflow's HTTP source, which ``tidal convert`` sets) the body, whatever
its ``Content-Type``, is **one** message, its bytes as they came.

Numaflow's headers work under both: ``x-numaflow-id`` is ``X-Message-Id``;
``x-numaflow-event-time`` (milliseconds since the epoch) is the messages' event time (their
source time: what a reduce windows them by), now by default. ``x-numaflow-keys`` is a
comma-separated list of the messages' keys (what a keyed reduce groups by, a map's
``datum.keys``), every message of the request the same; without it they have none. It is split
as Numaflow's Rust HTTP source splits it (``parse_keys_from_header``): each item trimmed of
whitespace, empty items dropped (``"a , b"`` → ``a``, ``b``; ``"a,,b"`` → ``a``, ``b``; ``""``
and ``",,"`` → no keys), and a value with a character outside visible ASCII (space and tab
allowed) refused with a 400, as Numaflow refuses it.

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
from dataclasses import dataclass, field

from tidal.errors import BadRequest

__all__ = [
    "EVENT_TIME", "JSON_LINES", "KEYS", "NUMAFLOW_ID", "NUMAFLOW_PATH", "BadRequest", "Parsed", "parse",
    "wrong_vertex",
]  # fmt: skip

NUMAFLOW_PATH = "/vertices/{vertex}"  # where Numaflow's clients POST; "/" is Tidal's
NUMAFLOW_ID = "x-numaflow-id"  # Numaflow's HTTP source: the message's id, for de-duplication
EVENT_TIME = "x-numaflow-event-time"
KEYS = "x-numaflow-keys"
JSON_LINES = ("application/x-ndjson", "application/jsonl", "application/json-lines")
MAX_KEY_LENGTH = 200
_KEY = re.compile(r"^[\x21-\x7e]+$")  # visible ASCII, no spaces


@dataclass(frozen=True, slots=True)
class Parsed:
    payloads: list[bytes]
    ids: list[str]
    event_time: float | None = None  # x-numaflow-event-time, in seconds; None: when it is stored
    keys: list[str] = field(default_factory=list)  # x-numaflow-keys, every message's; []: none


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
    value = headers.get(name.lower())
    if value is None:
        return None
    if not value or len(value) > MAX_KEY_LENGTH or not _KEY.match(value):
        raise BadRequest(400, f"{name} must be 1–{MAX_KEY_LENGTH} visible ASCII characters without spaces")
    return value


def _event_time(headers: Mapping[str, str]) -> float | None:
    value = headers.get(EVENT_TIME)
    if value is None:
        return None
    if not value.strip().isdigit():
        raise BadRequest(400, f"{EVENT_TIME} must be milliseconds since 1970-01-01 UTC (e.g. 1663006726000)")
    return int(value) / 1000.0


def _keys(headers: Mapping[str, str]) -> list[str]:
    """``x-numaflow-keys`` as Numaflow's HTTP source reads it: split on commas, each item trimmed,
    empty ones dropped; [] without the header. A client of Numaflow's that sends ``a, b`` or a
    trailing comma must get the same keys here, or a keyed reduce would group differently."""
    value = headers.get(KEYS)
    if value is None:
        return []
    if any(not (" " <= c <= "~" or c == "\t") for c in value):
        raise BadRequest(400, f"the value of {KEYS} contains characters that are not printable ASCII")
    return [item.strip() for item in value.split(",") if item.strip()]


def parse(content_type: str, body: bytes, headers: Mapping[str, str], raw: bool = False) -> Parsed:
    """The request's messages and their ids, or :class:`BadRequest`; ``raw``: the body is one
    message, as it came (``source.http.bodies: raw``)."""
    headers = {k.lower(): v for k, v in headers.items()}  # HTTP's names are case-insensitive
    event_time = _event_time(headers)
    keys = _keys(headers)
    if raw and not body:
        raise BadRequest(400, "the request holds no message (an empty body)")
    values: list[object] = [body] if raw else _values(content_type, body)
    if not values:
        raise BadRequest(400, "the request holds no message (an empty array or no lines)")
    key = _key(headers, "Idempotency-Key")
    message_id = _key(headers, "X-Message-Id")
    numaflow_id = _key(headers, NUMAFLOW_ID)
    if numaflow_id is not None:
        if message_id is not None and message_id != numaflow_id:
            raise BadRequest(400, f"send X-Message-Id or {NUMAFLOW_ID}, not both")
        message_id = numaflow_id
    if message_id is not None:
        if key is not None:
            raise BadRequest(400, "send Idempotency-Key or X-Message-Id, not both")
        if len(values) != 1:
            raise BadRequest(
                400, f"X-Message-Id names one message, and the body holds {len(values)}: "
                "use Idempotency-Key for a batch",
            )  # fmt: skip
        return Parsed([_payload(values[0])], [message_id], event_time, keys)
    prefix = key if key is not None else uuid.uuid4().hex
    ids = [f"{prefix}/{i}" for i in range(len(values))]
    return Parsed([_payload(v) for v in values], ids, event_time, keys)


def _payload(value: object) -> bytes:
    return value if isinstance(value, bytes) else _compact(value)


def wrong_vertex(named: str | None, vertex: str, alias: str = "") -> str | None:
    """Why a POST to ``/vertices/<named>`` does not reach the source ``vertex`` (None: it does).
    ``alias``: the other name it answers to (an HTTP MonoVertex ``N``'s receivers are the vertex
    ``N-http``, and its clients POST to ``N``)."""
    if named is None or named == vertex or (alias and named == alias):
        return None
    return f"this is the HTTP source of vertex {vertex!r}, not {named!r}: POST to / or /vertices/{vertex}"
