"""Which kind of pynumaflow handler a ``udf`` names, told apart by its type: one home for the rule.

Numaflow picks the handler's kind by the server the user's ``__main__`` starts
(``MapAsyncServer``, ``BatchMapAsyncServer``, ``ReduceAsyncServer``, ``ReduceStreamAsyncServer``);
Tidal runs no server, so it reads the kind from the handler itself, the same way at start (the
spec's checks, :mod:`tidal.spec.validate`) and in Spark's workers (:mod:`tidal.spark.query`):

- a class (or an instance of one) that subclasses pynumaflow's ``BatchMapper``,
  ``ReduceStreamer``, ``Reducer`` … is that kind;
- a function is told by how many arguments pynumaflow's server passes it: ``handler(datums)`` is
  a batch map, ``handler(keys, datum)`` a map, ``handler(keys, datums, md)`` a reduce,
  ``handler(keys, datums, output, md)`` a reduce stream;
- a class with ``session_reduce`` is pynumaflow-lite's ``SessionReducer`` (a separate,
  Rust-based package; pynumaflow itself has no session reducer), which Tidal does not run.

The spec layer cannot import pynumaflow (it is optional): classes are recognised by the names
of their bases.
"""

from __future__ import annotations

import inspect
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from tidal import errors

if TYPE_CHECKING:
    from tidal.spec.reduce import GroupBySpec

__all__ = ["SdkKind", "check_reducer", "map_kind", "reduce_kind"]


class SdkKind(StrEnum):
    MAP = "map"  # Mapper, MapStreamer, SourceTransformer, handler(keys, datum)
    BATCH_MAP = "batchmap"  # BatchMapper, handler(datums) -> BatchResponses
    REDUCE = "reduce"  # Reducer, handler(keys, datums, md) -> Messages
    REDUCE_STREAM = "reducestream"  # ReduceStreamer, handler(keys, datums, output, md)
    SESSION_REDUCE = "sessionreduce"  # pynumaflow-lite's SessionReducer: not run by Tidal


def _bases(obj: object) -> set[str]:
    kind = obj if isinstance(obj, type) else type(obj)
    return {c.__qualname__ for c in kind.__mro__ if c.__module__.split(".")[0].startswith("pynumaflow")}


def _arity(obj: object) -> int | None:
    """How many positional arguments ``obj`` (a function, a class's ``handler``, an instance's
    ``__call__``) takes, without ``self``; None when Python cannot say."""
    fn: Any = obj
    if isinstance(obj, type):
        fn = getattr(obj, "handler", None) or obj.__call__
        skip = 1  # an unbound method: self
    else:
        skip = 0
        if not inspect.isfunction(obj) and not inspect.ismethod(obj) and hasattr(obj, "handler"):
            fn = obj.handler
    try:
        parameters = list(inspect.signature(fn).parameters.values())[skip:]
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in parameters if p.kind in positional and p.default is p.empty)


def map_kind(obj: object) -> SdkKind:
    """``udf: {pynumaflow: …}``'s handler: a batch map or a (per message) map."""
    names = _bases(obj)
    if "BatchMapper" in names:
        return SdkKind.BATCH_MAP
    if names & {"Mapper", "MapStreamer", "SourceTransformer"}:
        return SdkKind.MAP
    return SdkKind.BATCH_MAP if _arity(obj) == 1 else SdkKind.MAP


def reduce_kind(obj: object) -> SdkKind:
    """``udf: {reduce: …}``'s handler: a reduce, a reduce stream, or pynumaflow-lite's session
    reducer (refused at start)."""
    names = _bases(obj)
    if "ReduceStreamer" in names:
        return SdkKind.REDUCE_STREAM
    if "Reducer" in names:
        return SdkKind.REDUCE
    if "SessionReducer" in names or callable(getattr(obj, "session_reduce", None)):
        return SdkKind.SESSION_REDUCE
    return SdkKind.REDUCE_STREAM if _arity(obj) == 4 else SdkKind.REDUCE


def check_reducer(handler: object, group: GroupBySpec | None, at: str, args: list[Any] | None = None) -> None:
    """A reduce vertex's handler agrees with its window, or a :class:`~tidal.errors.SpecError`
    naming the field (``at``: the vertex's ``udf``): a ``ReduceStreamer`` on a fixed or sliding
    window with ``streaming: true``, a ``Reducer`` on any window without it, and no
    pynumaflow-lite ``SessionReducer``. On Numaflow a mismatch leaves the vertex waiting for a
    server that never starts (its FAQ); Tidal says so at start instead. A class must be built
    with ``reduceArgs`` (``args``), as the server builds it with ``init_args``."""
    if isinstance(handler, type) and reduce_kind(handler) is not SdkKind.SESSION_REDUCE:
        try:
            inspect.signature(handler).bind(*(args or []))
        except TypeError as exc:
            raise errors.SpecError(
                f"{at}.reduceArgs",
                f"{handler.__name__} cannot be built with reduceArgs {args or []} ({exc})",
                "give its constructor's arguments, as init_args: ReduceStreamAsyncServer(cls, "
                "init_args=(0,)) is reduceArgs: [0]",
            ) from None
        except ValueError:  # no signature Python can read: the first window will tell
            pass
    if group is None:
        return
    kind, window = reduce_kind(handler), group.window
    flag = f"{at}.groupBy.window.{window.kind}.streaming"
    if kind is SdkKind.SESSION_REDUCE:
        raise errors.SpecError(
            f"{at}.reduce",
            "is a session reducer of pynumaflow-lite's shape (session_reduce); Tidal runs pynumaflow's "
            "handlers, and pynumaflow has no SessionReducer (pynumaflow-lite is a separate, Rust-based SDK)",
            "write a pynumaflow Reducer (handler(keys, datums, md)): on a session window Spark merges "
            "the sessions in its state and calls it once per closed session, so no accumulator or "
            "merge_accumulator is needed",
        )
    if kind is SdkKind.REDUCE_STREAM and window.session is not None:
        raise errors.SpecError(
            f"{at}.reduce",
            "is a ReduceStreamer, which runs on a fixed or sliding window (Numaflow's session windows "
            "take a SessionReducer)",
            "use a Reducer on the session window, or a fixed or sliding window with streaming: true",
        )
    if kind is SdkKind.REDUCE_STREAM and not window.streaming:
        raise errors.SpecError(
            flag,
            "is not set and the handler is a ReduceStreamer (on Numaflow the vertex would wait for a "
            "reduce server that never starts)",
            "set streaming: true on the window",
        )
    if kind is SdkKind.REDUCE and window.streaming:
        raise errors.SpecError(
            flag,
            "is true and the handler is a Reducer, not a ReduceStreamer (on Numaflow the vertex would "
            "wait for a reduce-stream server that never starts)",
            "remove streaming: true, or write the handler as a ReduceStreamer "
            "(handler(keys, datums, output, md))",
        )
