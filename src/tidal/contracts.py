"""What a user's source and sink classes implement: typed Protocols, checked when they are built.

A pipeline names them as ``module:Class`` (``source.user.class``, ``sink.user.class``, a UDF's
``deadLetter.user.class``); Tidal builds them with the spec's ``options`` as keyword arguments,
inside the Spark tasks and readers, and checks them against these Protocols there, so a missing
method is an error that names the class, the method and the spec field, not an
``AttributeError`` deep in a Spark task.

* :class:`Source` — Numaflow's UDSource contract: ``read(n)`` returns up to ``n`` messages as
  ``(offset, payload)`` pairs (or ``(offset, payload, event_time)``: the message's source time);
  ``ack(offsets)`` acknowledges them once they are stored; ``pending()`` says how many the
  source still holds, and a negative number, ``None`` or an exception means "not available"
  (the autoscaler then leaves the source alone). Offsets must identify messages: a source may
  redeliver after a crash, and Tidal stores each offset once.
* :class:`Sink` — ``write(records)`` with ``records`` a list of ``(id, payload)``: at least once
  (a replayed micro-batch writes again; ids let the sink de-duplicate).
* :class:`DeadLetterSink` — a sink that also takes ``write_dead(records)`` with
  ``(id, payload, error)`` triples, when it serves as a UDF's ``deadLetter``.
* :class:`CommittingSink` — a sink with ``commit(batch_id)``, called once per micro-batch after
  every task wrote: the place to make writes visible or to flush.
* :class:`Message` — what a map or flatmap UDF may return instead of bytes, to tag the message
  for conditional forwarding (:mod:`tidal.spec.routing`). pynumaflow's ``Message`` is accepted
  the same way (anything with ``value`` and ``tags``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from tidal import errors

__all__ = [
    "DROP",
    "CommittingSink",
    "DeadLetterSink",
    "Message",
    "Sink",
    "Source",
    "ask_pending",
    "check_sink",
    "check_source",
]

DROP = "U+005C__DROP__"  # Numaflow's drop tag (pynumaflow's ``DROP``): the message goes nowhere


@dataclass(frozen=True, slots=True)
class Message:
    """A UDF's output with tags: ``Message(b"42", tags=("even",))``. The edges whose
    ``conditions`` match the tags take it; ``Message.to_drop()`` goes nowhere (Numaflow's).
    ``keys`` (Numaflow's message keys) replace the input's; None keeps them."""

    value: bytes | str
    tags: tuple[str, ...] = ()
    keys: tuple[str, ...] | None = None

    @classmethod
    def to_drop(cls) -> Message:
        return cls(b"", (DROP,))


@runtime_checkable
class Source(Protocol):
    def read(self, n: int) -> Iterable[tuple[object, bytes | str]]: ...

    def ack(self, offsets: Sequence[object]) -> None: ...

    def pending(self) -> float | None: ...


@runtime_checkable
class Sink(Protocol):
    def write(self, records: list[tuple[str, bytes]]) -> None: ...


@runtime_checkable
class DeadLetterSink(Sink, Protocol):
    def write_dead(self, records: list[tuple[str, bytes, str]]) -> None: ...


@runtime_checkable
class CommittingSink(Sink, Protocol):
    def commit(self, batch_id: int) -> None: ...


_T = TypeVar("_T")


def _check(obj: _T, methods: Sequence[str], what: str, at: str) -> _T:
    missing = [m for m in methods if not callable(getattr(obj, m, None))]
    if missing:
        raise errors.SpecError(
            at,
            f"{type(obj).__module__}:{type(obj).__qualname__} is not a {what}: "
            f"no method {', '.join(f'{m}()' for m in missing)}",
            f"implement {', '.join(methods)} (see tidal.contracts.{what})",
        )
    return obj


def ask_pending(pending: Callable[[], float | None]) -> tuple[float | None, str]:
    """Call a source's ``pending()`` under the UDSource rule: raising, ``None`` or a negative
    number mean "not available" (``None``), with why; the pipeline keeps running. (Here, beside
    the contract, so a task's reader gets it without importing the controller.)"""
    try:
        value = pending()
    except Exception as exc:  # the user's code: any exception means "not available"
        return None, f"pending() raised {type(exc).__name__}: {exc}"
    if value is None or value < 0:
        return None, f"pending() returned {value!r}: not available"
    return float(value), ""


def check_source(obj: object, at: str) -> Source:
    """``obj`` if it implements :class:`Source`, else a :class:`~tidal.errors.SpecError` at ``at``."""
    checked = _check(obj, ("read", "ack", "pending"), "Source", at)
    assert isinstance(checked, Source)
    return checked


def check_sink(obj: object, at: str) -> Sink:
    """``obj`` if it implements :class:`Sink`, else a :class:`~tidal.errors.SpecError` at ``at``."""
    checked = _check(obj, ("write",), "Sink", at)
    assert isinstance(checked, Sink)
    return checked
