"""Apply a vertex's UDF to a batch of messages: map, flatmap or filter, per row or per Arrow batch.

The contract for the user's function (``docs/pipeline-spec.md``):

| kind | ``batch: row`` (default) | ``batch: arrow`` |
|---|---|---|
| map | ``f(payload: bytes) -> bytes \\| str`` | ``f(pa.Array[binary]) -> array of bytes/str``, same length |
| flatmap | ``f(payload) -> iterable of bytes/str`` | ``f(array) -> list of lists``, same length |
| filter | ``f(payload) -> bool`` | ``f(array) -> boolean mask``, same length |

Output ids are deterministic, so a replayed batch rewrites the same ids: a map or a filter keeps
the input id, a flatmap's ``k``-th output is ``<id>.<k>``.

Failures. A call that raises (or returns the wrong type) is retried ``retries`` times. Then the
message goes to the dead letter, with the exception's text, when the vertex has ``deadLetter``;
otherwise :class:`tidal.errors.UdfError` names the vertex, the message id and the exception, and
the micro-batch fails: its input is not committed, so nothing is lost, and a restart after the
fix resumes from the same messages. An Arrow call that fails is retried as a whole, then the
batch is split into single messages to find exactly which ones fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tidal import errors
from tidal.spec.model import UdfKind, UdfSpec
from tidal.spec.validate import resolve

__all__ = ["Outcome", "Transform"]


@dataclass
class Outcome:
    """What a batch became: messages to write on, and dead letters ``(id, payload, error)``."""

    ids: list[str] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    dead: list[tuple[str, bytes, str]] = field(default_factory=list)


def _as_bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"a UDF must return bytes or str, got {type(value).__name__}")


class _Failed(Exception):
    """The call failed on every attempt; ``cause`` is the last exception."""

    def __init__(self, cause: BaseException, attempts: int) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.attempts = attempts


class Transform:
    """A vertex's UDF, resolved once per process and applied to ``(ids, payloads)`` batches."""

    def __init__(self, vertex: str, udf: UdfSpec, *, dead_letter: bool) -> None:
        self.vertex = vertex
        self.kind = udf.kind
        self.arrow = udf.batch == "arrow"
        self.retries = udf.retries
        self.dead_letter = dead_letter
        self.fn: Callable[[Any], Any] = resolve(udf.function, f"vertices[{vertex}].udf.{udf.kind.value}")

    def apply(self, ids: list[str], payloads: list[bytes]) -> Outcome:
        out = Outcome()
        if self.arrow:
            self._apply_arrow(ids, payloads, out)
        else:
            for message_id, payload in zip(ids, payloads, strict=True):
                self._one(message_id, payload, out)
        return out

    # -- per message -----------------------------------------------------------------------------

    def _attempts(self, call: Callable[[], Any]) -> Any:
        last: BaseException | None = None
        for _ in range(self.retries + 1):
            try:
                return call()
            except Exception as exc:  # the user's code: any exception is a failed attempt
                last = exc
        assert last is not None
        raise _Failed(last, self.retries + 1)

    def _row(self, payload: bytes) -> list[bytes] | None:
        """The outputs of one message (None = filtered out), converted so type errors retry too."""
        result = self.fn(payload)
        if self.kind is UdfKind.MAP:
            return [_as_bytes(result)]
        if self.kind is UdfKind.FILTER:
            if not isinstance(result, bool):
                raise TypeError(f"a filter must return bool, got {type(result).__name__}")
            return [payload] if result else None
        if isinstance(result, str | bytes) or not isinstance(result, Iterable):
            raise TypeError(f"a flatmap must return an iterable of bytes/str, got {type(result).__name__}")
        return [_as_bytes(item) for item in result]

    def _one(
        self,
        message_id: str,
        payload: bytes,
        out: Outcome,
        call: Callable[[bytes], list[bytes] | None] | None = None,
    ) -> None:
        """One message through ``call`` (the row function by default), with its own retries."""
        call = call or self._row
        try:
            results = self._attempts(lambda: call(payload))
        except _Failed as failed:
            self._fail(message_id, payload, failed, out)
            return
        self._emit(message_id, results, out)

    def _emit(self, message_id: str, results: list[bytes] | None, out: Outcome) -> None:
        if not results:
            return
        if self.kind is UdfKind.FLATMAP:
            out.ids.extend(f"{message_id}.{k}" for k in range(len(results)))
        else:
            out.ids.append(message_id)
        out.payloads.extend(results)

    def _fail(self, message_id: str, payload: bytes, failed: _Failed, out: Outcome) -> None:
        if not self.dead_letter:
            raise errors.UdfError(self.vertex, message_id, failed.cause, failed.attempts) from None
        out.dead.append((message_id, payload, f"{type(failed.cause).__name__}: {failed.cause}"))

    # -- per Arrow batch -------------------------------------------------------------------------

    def _arrow_rows(self, payloads: list[bytes]) -> list[list[bytes] | None]:
        import pyarrow as pa

        result = self.fn(pa.array(payloads, pa.binary()))
        values = result.to_pylist() if hasattr(result, "to_pylist") else list(result)
        if len(values) != len(payloads):
            raise ValueError(
                f"an Arrow UDF must return {len(payloads)} values, one per message, got {len(values)}"
            )
        if self.kind is UdfKind.MAP:
            return [[_as_bytes(v)] for v in values]
        if self.kind is UdfKind.FILTER:
            return [[p] if bool(v) else None for v, p in zip(values, payloads, strict=True)]
        return [[_as_bytes(item) for item in v] for v in values]

    def _apply_arrow(self, ids: list[str], payloads: list[bytes], out: Outcome) -> None:
        if not payloads:
            return
        try:
            rows = self._attempts(lambda: self._arrow_rows(payloads))
        except _Failed:
            # Find the messages that fail: each one alone, with its own retries.
            for message_id, payload in zip(ids, payloads, strict=True):
                self._one(message_id, payload, out, lambda p: self._arrow_rows([p])[0])
            return
        for message_id, results in zip(ids, rows, strict=True):
            self._emit(message_id, results, out)
