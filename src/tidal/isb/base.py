"""The inter-step buffer (ISB) protocol: bounded, replayable, de-duplicating queues between vertices.

A buffer holds messages in sequence order. Writers ``append`` a batch with one id per message;
the batch is refused whole (:class:`tidal.errors.BufferFull`, nothing stored) when it would pass
``max_length``, and ids seen within the de-duplication window are stored once, even after the
original was committed and trimmed. That is what makes a replayed micro-batch harmless.
Readers ``read`` by sequence (replayable until committed) and ``commit`` up to a sequence, which
trims. ``pending`` = appended − committed.

De-duplication comes in two grains:

- ``append(payloads, ids)``: **per message**. Each id is stored once. A user source's staging
  buffer needs this: a source may redeliver any subset of its messages after a crash.
- ``append_batch(key, ids, payloads)``: **per batch**. A batch whose ``key`` was seen within the
  window is skipped whole. The runtime writes this way: a key names the input range a batch was
  made from (``<vertex>:<first>-<last>``), so a replayed task rewrites keys the buffer already
  holds. Per-batch de-duplication costs one key per batch instead of one per message (about
  10× the append throughput, ``docs/benchmarks.md``). Keys and message ids share one namespace
  per buffer.

``read_batch(first, last)`` returns the range as one Arrow record batch (``seq, id, payload``),
which is what the runtime moves; ``read`` and ``read_range`` return ``(seq, id, payload)`` tuples.

Two backends implement it: :mod:`tidal.isb.sqlite` (default, one host) and
:mod:`tidal.isb.jetstream` (NATS JetStream, many hosts). One conformance suite tests both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tidal.scaling.limits import DEFAULT_MAX_LENGTH, DEFAULT_USAGE_LIMIT, BufferLimits

__all__ = [
    "DEFAULT_DEDUP_WINDOW_SECONDS",
    "DEFAULT_MAX_LENGTH",
    "DEFAULT_USAGE_LIMIT",
    "AppendResult",
    "Buffer",
    "BufferLimits",
    "BufferStats",
    "BufferStore",
    "Message",
    "check_batch",
]

DEFAULT_DEDUP_WINDOW_SECONDS = 120.0  # JetStream's default duplicate window is 2 minutes


Message = tuple[int, str, bytes]
"""One stored message: ``(seq, id, payload)``. Read it by unpacking: ``for seq, id, payload in …``.

A plain tuple on purpose: SQLite hands rows over as exactly this, so a range read returns them
untouched. Wrapping each row in a named tuple or a dataclass cost 0.3–1 µs per message, up to
half of a range read (``tidal bench buffers``).
"""


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Sequences written (``first_seq..last_seq``; 0, 0 when nothing new) and duplicates skipped."""

    first_seq: int
    last_seq: int
    appended: int
    duplicates: int


@dataclass(frozen=True, slots=True)
class BufferStats:
    name: str
    last_seq: int  # highest sequence ever appended
    committed: int  # highest sequence committed by the reader
    length: int  # messages stored now (not yet trimmed)
    limits: BufferLimits

    @property
    def pending(self) -> int:
        return self.last_seq - self.committed

    @property
    def usage(self) -> float:
        """Stored messages over ``max_length`` (Numaflow's buffer usage)."""
        return self.length / self.limits.max_length

    @property
    def full(self) -> bool:
        """At or over the usable length (``maxLength × usageLimit``): writers hold back."""
        return self.length >= self.limits.usable_length


def check_batch(payloads: Sequence[object], ids: Sequence[object]) -> None:
    """The shape every backend requires of ``append``: one ``str`` id per ``bytes`` payload."""
    if len(payloads) != len(ids):
        raise TypeError(f"append: {len(payloads)} payloads but {len(ids)} ids (one id per message)")
    # Fast path: the set of types, built in C (a per-item isinstance loop cost 0.3 µs a message).
    if set(map(type, payloads)) <= _PAYLOAD_TYPES and set(map(type, ids)) <= {str}:
        return
    for message_id, payload in zip(ids, payloads, strict=True):
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(
                f"append: payloads must be bytes, got {type(payload).__name__} for id {message_id!r}"
            )
        if not isinstance(message_id, str):
            raise TypeError(f"append: ids must be str, got {type(message_id).__name__}")


_PAYLOAD_TYPES = {bytes, bytearray, memoryview}


@runtime_checkable
class Buffer(Protocol):
    """One bounded buffer."""

    @property
    def name(self) -> str: ...

    @property
    def limits(self) -> BufferLimits: ...

    def append(
        self,
        payloads: Sequence[bytes],
        ids: Sequence[str],
        times: Sequence[float] | None = None,
        keys: Sequence[Sequence[str] | None] | None = None,
    ) -> AppendResult:
        """Append a batch atomically (messages entering the pipeline), their source ``times``
        the event times a source gave them (None: now) and their ``keys`` (Numaflow's message
        keys, one list or None per message, stored as ``append_batch`` stores them; None: none),
        which an HTTP source's ``x-numaflow-keys`` gives them. An id already stored is skipped.
        Raises ``BufferFull`` (nothing stored) past ``max_length``."""
        ...

    def append_batch(
        self,
        key: str,
        ids: Sequence[str] | Any,
        payloads: Sequence[bytes] | Any,
        times: Any = None,
        keys: Any = None,
    ) -> AppendResult:
        """Append a batch atomically, skipped whole (``duplicates = n``) when ``key`` was seen.
        ``ids``, ``payloads``, the messages' source ``times`` (None: now) and their ``keys`` (a
        list of strings or None each; None: none) are lists or Arrow arrays. Raises
        ``BufferFull`` like ``append``."""
        ...

    def read(self, after: int, limit: int) -> list[Message]:
        """Up to ``limit`` messages with ``seq > after``, in order. Replayable until committed."""
        ...

    def read_batch(self, first: int, last: int) -> Any:
        """Messages with ``first <= seq <= last`` as one ``pyarrow.RecordBatch`` (seq, id, payload,
        t: the source time, keys)."""
        ...

    def read_range(self, first: int, last: int) -> list[Message]:
        """Messages with ``first <= seq <= last``, in order."""
        ...

    def commit(self, seq: int) -> None:
        """Everything up to ``seq`` is processed: trim it. Committing backwards is a no-op."""
        ...

    def stats(self) -> BufferStats: ...

    def pending(self) -> int: ...

    def committed(self) -> int:
        """The highest sequence committed (0 before the first commit): where a reader starts."""
        ...

    def last_seq(self) -> int:
        """The highest sequence ever appended (0 when none): how far a reader may read."""
        ...

    def verify(self) -> None:
        """Raise :class:`~tidal.errors.BufferError` naming what a crash damaged (a stored batch
        whose bytes are not all there), at the start of a run, before anything reads it."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class BufferStore(Protocol):
    """The buffers of one pipeline."""

    def create(self, name: str, limits: BufferLimits = ...) -> Buffer:
        """Create the buffer if needed (idempotent) and return it."""
        ...

    def open(self, name: str) -> Buffer:
        """An existing buffer; raises ``BufferNotFound``."""
        ...

    def list(self) -> list[str]: ...

    def drop(self, name: str) -> None: ...

    def close(self) -> None: ...
