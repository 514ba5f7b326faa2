"""Apply a vertex's UDF to a batch of messages: map, flatmap or filter, per row or per Arrow batch.

The contract for the user's function (``docs/pipeline-spec.md``):

| kind | ``batch: row`` (default) | ``batch: arrow`` |
|---|---|---|
| map | ``f(payload: bytes) -> bytes \\| str`` | ``f(pa.Array[binary]) -> array of bytes/str``, same length |
| flatmap | ``f(payload) -> iterable of bytes/str`` | ``f(array) -> list of lists``, same length |
| filter | ``f(payload) -> bool`` | ``f(array) -> boolean mask``, same length |

Output ids are deterministic: a map or a filter keeps the input id, a flatmap's ``k``-th output
is ``<id>.<k>``.

Batches stay in Arrow. A map or a filter passes the input's id column on untouched (a filter
through its mask), and the payloads go through Python only to call a row function: the loop
has no per-message ``try`` or retry bookkeeping until a call fails. An Arrow function's result is
used as the output column directly.

Failures. A call that raises (or returns the wrong type, or runs past ``timeoutSeconds``) is
retried ``retries`` times (so it is made ``retries + 1`` times in all). Then the
message goes to the dead letter, with the exception's text and the user's frames of its traceback,
when the vertex has ``deadLetter``;
otherwise :class:`tidal.errors.UdfError` names the vertex, the message id and the exception, and
the micro-batch fails: its input is not committed, so nothing is lost, and a restart after the
fix resumes from the same messages. An Arrow call that fails is retried as a whole, then the
batch is split into single messages to find exactly which ones fail.
"""

from __future__ import annotations

import os
import signal
import threading
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa

from tidal import errors
from tidal.contracts import DROP
from tidal.spark.query.outcome import Collected, Outcome, Output, Switch, as_bytes, output
from tidal.spec.model import UdfKind, UdfSpec
from tidal.spec.sdk_kinds import SdkKind, map_kind
from tidal.spec.validate import resolve

__all__ = ["Outcome", "Transform", "UdfTimeout"]


def _runtime(filename: str) -> bool:
    """Tidal's runtime (not its examples), PySpark, py4j or the interpreter's own frames."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    if filename.startswith(package):
        return not filename.startswith(package + "examples" + os.sep)
    return any(part in filename for part in ("/pyspark/", "/py4j/", "<frozen "))


def user_frames(exc: BaseException) -> str:
    """The frames of ``exc``'s traceback that are the user's code, formatted as Python does
    (indented two spaces), or ``""``: the line of the UDF that raised survives Spark's wrapping."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _runtime(f.filename)]
    return "".join(traceback.format_list(frames)).rstrip()


class UdfTimeout(TimeoutError):
    """One call of the UDF ran past ``timeoutSeconds``: a failed attempt like any exception."""


def _with_timeout(fn: Callable[[Any], Any], seconds: float) -> Callable[[Any], Any]:
    """``fn`` with a per-call time limit, by a real-time interval timer (SIGALRM).

    The limit interrupts Python code and blocking calls (sleeps, socket reads) alike; a C
    extension that never returns to the interpreter cannot be interrupted, and Tidal says so in
    the docs. Spark runs a task's Python in its worker's main thread, where signals are handled;
    elsewhere (a thread) the limit cannot be enforced and the call runs without one.
    """

    def alarm(signum: int, frame: object) -> None:
        raise UdfTimeout(f"the call took longer than timeoutSeconds {seconds:g}")

    def limited(value: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return fn(value)
        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return fn(value)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    return limited


class _Failed(Exception):
    """The call failed on every attempt; ``cause`` is the last exception."""

    def __init__(self, cause: BaseException, attempts: int) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.attempts = attempts


class Transform:
    """A vertex's UDF, resolved once per process and applied to Arrow ``(ids, payloads)`` batches."""

    def __init__(self, vertex: str, udf: UdfSpec, *, dead_letter: bool) -> None:
        self.vertex = vertex
        self.kind = udf.kind
        self.arrow = udf.batch == "arrow"
        self.retries = udf.retries
        self.dead_letter = dead_letter
        path = f"vertices[{vertex}].udf.{udf.kind.value}"
        fn: Callable[[Any], Any] = resolve(udf.function, path)
        self.batched = self.kind is UdfKind.PYNUMAFLOW and map_kind(fn) is SdkKind.BATCH_MAP
        if self.batched:  # a BatchMapper: the task's batch in one call (tidal.spark.query.batchmap)
            from tidal.spark.query.batchmap import batch_handler

            fn = batch_handler(fn, path)
        elif self.kind is UdfKind.PYNUMAFLOW:
            from tidal.spark.query.pynumaflow import map_handler

            fn = map_handler(fn, path)
        self.fn = fn if udf.timeout_seconds is None else _with_timeout(fn, udf.timeout_seconds)

    def apply(self, ids: Any, payloads: Any, times: Any = None, keys: Any = None) -> Outcome:
        """``ids`` (string) and ``payloads`` (binary), as Arrow arrays or lists, with their
        source ``times`` and ``keys`` (what a pynumaflow handler sees as the event time and the
        keys; None: now, none)."""
        ids = ids if isinstance(ids, pa.Array) else pa.array(ids, pa.string())
        payloads = payloads if isinstance(payloads, pa.Array) else pa.array(payloads, pa.binary())
        if len(payloads) == 0:
            return Outcome()
        if self.arrow:
            return self._apply_arrow(ids, payloads)
        if self.kind is UdfKind.PYNUMAFLOW:
            from tidal.spark.query.pynumaflow import datums

            stamps = None if times is None else (times.to_pylist() if hasattr(times, "to_pylist") else times)
            keyed = None if keys is None else (keys.to_pylist() if hasattr(keys, "to_pylist") else keys)
            batch = datums(payloads.to_pylist(), stamps, keyed)
            if self.batched:
                return self._batch_map(ids.to_pylist(), batch)
            return self._careful(ids.to_pylist(), batch, 0, Collected()).outcome()
        values = payloads.to_pylist()
        if self.kind is UdfKind.MAP:
            return self._fast_map(ids, values)
        if self.kind is UdfKind.FILTER:
            return self._fast_filter(ids, payloads, values)
        return self._careful(ids.to_pylist(), values, 0, Collected()).outcome()

    # -- the fast paths: no per-message bookkeeping until a call fails -------------------------------

    def _fast_map(self, ids: pa.Array, values: list[bytes]) -> Outcome:
        fn, out = self.fn, list[bytes]()
        append = out.append
        try:
            for value in values:
                result = fn(value)
                if type(result) is bytes:
                    append(result)
                elif isinstance(result, str):
                    append(result.encode())
                else:
                    raise Switch(result)
        except Switch as switch:  # a message with tags (or a wrong type): the careful path from here
            return self._resume(ids, values, [[r] for r in out], None, switch.result)
        except Exception as exc:
            return self._resume(ids, values, [[r] for r in out], exc)
        return Outcome(ids, pa.array(out, pa.binary()))

    def _fast_filter(self, ids: pa.Array, payloads: pa.Array, values: list[bytes]) -> Outcome:
        fn, keep = self.fn, list[bool]()
        append = keep.append
        try:
            for value in values:
                result = fn(value)
                if type(result) is not bool:
                    raise TypeError(f"a filter must return bool, got {type(result).__name__}")
                append(result)
        except Exception as exc:
            done = [[v] if k else None for k, v in zip(keep, values, strict=False)]
            return self._resume(ids, values, done, exc)
        mask = pa.array(keep, pa.bool_())
        return _filtered(ids, payloads, mask)

    def _resume(
        self,
        ids: pa.Array,
        values: list[bytes],
        done: Sequence[Sequence[Output] | None],
        exc: Exception | None,
        result: object = None,
    ) -> Outcome:
        """The fast loop stopped at message ``len(done)``, with ``exc`` (its first attempt) or
        with a ``result`` it does not take as it is: keep what was done, then go message by
        message from there."""
        id_list = ids.to_pylist()
        collected = Collected()
        for at, (message_id, results) in enumerate(zip(id_list, done, strict=False)):
            self._emit(at, message_id, results, collected)
        at = len(done)
        if exc is None:
            try:
                self._emit(at, id_list[at], [output(result)], collected)
            except TypeError as wrong:
                exc = wrong
        if exc is not None:
            self._one(at, id_list[at], values[at], collected, self._row, tried=1, last=exc)
        return self._careful(id_list, values, at + 1, collected).outcome()

    # -- per message -----------------------------------------------------------------------------

    def _attempts(self, call: Callable[[], Any], tried: int = 0, last: BaseException | None = None) -> Any:
        for _ in range(tried, self.retries + 1):
            try:
                return call()
            except Exception as exc:  # the user's code: any exception is a failed attempt
                last = exc
        assert last is not None
        raise _Failed(last, self.retries + 1)

    def _row(self, payload: Any) -> list[Output] | None:
        """The outputs of one message (None = filtered out), converted so type errors retry too."""
        result = self.fn(payload)
        if self.kind is UdfKind.MAP:
            return [output(result)]
        if self.kind is UdfKind.FILTER:
            if not isinstance(result, bool):
                raise TypeError(f"a filter must return bool, got {type(result).__name__}")
            return [payload] if result else None
        if isinstance(result, str | bytes) or not isinstance(result, Iterable):
            wanted = "Messages" if self.kind is UdfKind.PYNUMAFLOW else "an iterable of bytes/str"
            raise TypeError(f"a {self.kind.value} must return {wanted}, got {type(result).__name__}")
        return [output(item) for item in result]

    def _careful(
        self,
        ids: list[str],
        values: list[bytes],
        start: int,
        out: Collected,
        call: Callable[[Any], Sequence[Output] | None] | None = None,
    ) -> Collected:
        for at in range(start, len(values)):
            self._one(at, ids[at], values[at], out, call or self._row)
        return out

    def _one(
        self,
        at: int,
        message_id: str,
        payload: bytes,
        out: Collected,
        call: Callable[[Any], Sequence[Output] | None],
        tried: int = 0,
        last: BaseException | None = None,
    ) -> None:
        """Message ``at`` through ``call``, with its own retries (``tried`` attempts already made)."""
        try:
            results = self._attempts(lambda: call(payload), tried, last)
        except _Failed as failed:
            self._fail(message_id, payload, failed, out)
            return
        self._emit(at, message_id, results, out)

    def _emit(self, at: int, message_id: str, results: Sequence[Output] | None, out: Collected) -> None:
        """Message ``at``'s outputs: a flatmap's ``k``-th is ``<id>.<k>`` (a pynumaflow handler's
        too, when it returns more than one); a DROP-tagged one is counted and goes nowhere."""
        if not results:
            return
        numbered = self.kind is UdfKind.FLATMAP or len(results) > 1
        for k, item in enumerate(results):
            payload, tags, keys, when = item if isinstance(item, tuple) else (item, (), None, None)
            if DROP in tags:
                out.dropped += 1
                continue
            out.origin.append(at)
            out.ids.append(f"{message_id}.{k}" if numbered else message_id)
            out.payloads.append(payload)
            out.tags.append(tags)
            out.tagged = out.tagged or bool(tags)
            out.keys.append(keys)
            out.keyed = out.keyed or keys is not None
            out.event_times.append(when)
            out.timed = out.timed or when is not None

    def _fail(self, message_id: str, payload: Any, failed: _Failed, out: Collected) -> None:
        if not self.dead_letter:
            frames = user_frames(failed.cause)
            raise errors.UdfError(self.vertex, message_id, failed.cause, failed.attempts, frames) from None
        value = payload if isinstance(payload, bytes) else payload.value  # a pynumaflow Datum's
        reason = f"{type(failed.cause).__name__}: {failed.cause}"
        frames = user_frames(failed.cause)  # where in the user's code: the line that raised
        out.dead.append((message_id, value, f"{reason}\n{frames}" if frames else reason))

    def _batch_map(self, ids: list[str], batch: list[Any]) -> Outcome:
        """A BatchMapper's call on the whole batch, retried; then, if it still fails, one message
        at a time (each in a batch of its own) to find which ones fail."""
        from tidal.spark.query.batchmap import with_ids

        batch = with_ids(batch, ids)
        out = Collected()
        try:
            results = self._attempts(lambda: self.fn(batch))
        except _Failed:
            return self._careful(ids, batch, 0, out, lambda datum: self.fn([datum])[0]).outcome()
        for at, (message_id, items) in enumerate(zip(ids, results, strict=True)):
            self._emit(at, message_id, items, out)
        return out.outcome()

    # -- per Arrow batch -------------------------------------------------------------------------

    def _arrow_call(self, payloads: pa.Array) -> Any:
        result = self.fn(payloads)
        if len(result) != len(payloads):
            raise ValueError(
                f"an Arrow UDF must return {len(payloads)} values, one per message, got {len(result)}"
            )
        return result

    def _arrow_whole(self, ids: pa.Array, payloads: pa.Array) -> Outcome:
        """The whole batch in one call; the result becomes the output column where it can."""
        result = self._arrow_call(payloads)
        if self.kind is UdfKind.MAP:
            if isinstance(result, pa.Array | pa.ChunkedArray) and result.type in (pa.binary(), pa.string()):
                column = result.cast(pa.binary())
                column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
                if column.null_count:
                    raise TypeError("a UDF must return bytes or str, got None")
                return Outcome(ids, column)
            return Outcome(ids, pa.array([as_bytes(v) for v in _values(result)], pa.binary()))
        if self.kind is UdfKind.FILTER:
            mask = result if isinstance(result, pa.Array) else pa.array([bool(v) for v in result], pa.bool_())
            mask = mask.cast(pa.bool_()).fill_null(False)
            return _filtered(ids, payloads, mask)
        out = Collected()
        for at, (message_id, items) in enumerate(zip(ids.to_pylist(), _values(result), strict=True)):
            self._emit(at, message_id, [as_bytes(item) for item in items], out)
        return out.outcome()

    def _arrow_rows(self, payload: bytes) -> list[bytes] | None:
        """One message through the Arrow function (to find which messages fail)."""
        whole = self._arrow_whole(pa.array(["-"], pa.string()), pa.array([payload], pa.binary()))
        if self.kind is UdfKind.FLATMAP:
            return list(whole.payloads.to_pylist())
        return list(whole.payloads.to_pylist()) or None

    def _apply_arrow(self, ids: pa.Array, payloads: pa.Array) -> Outcome:
        try:
            return self._attempts(lambda: self._arrow_whole(ids, payloads))  # type: ignore[no-any-return]
        except _Failed:
            # Find the messages that fail: each one alone, with its own retries.
            out = self._careful(ids.to_pylist(), payloads.to_pylist(), 0, Collected(), self._arrow_rows)
            return out.outcome()


def _filtered(ids: pa.Array, payloads: pa.Array, mask: pa.Array) -> Outcome:
    """What a filter's ``mask`` keeps, with where each kept message was."""
    import pyarrow.compute as pc

    return Outcome(ids.filter(mask), payloads.filter(mask), origin=pc.indices_nonzero(mask))


def _values(result: Any) -> list[Any]:
    return result.to_pylist() if hasattr(result, "to_pylist") else list(result)
