"""A pynumaflow ``Sourcer`` (``source: {pynumaflow: module:Class}``) as a staged source.

It is read as a Tidal user source is (:mod:`tidal.spark.sources.staged`): ``read_handler`` fills
the staging buffer, ``ack_handler`` is called once the messages are stored there,
``nack_handler`` when they were read and could not be stored (so the source gives them again), and
``pending_handler``'s count drives scaling (a negative count is "not available"). Its offsets
become the messages' ids (``<partition>:<offset>``), so a redelivered offset is stored once. A
message's ``event_time`` becomes its source time (a naive ``datetime`` is UTC).
"""

from __future__ import annotations

from typing import Any

from tidal import contracts
from tidal.spark.batch.clients import call as _call
from tidal.spark.batch.config import QueryConfig
from tidal.spark.sources.connector import SourceConnector
from tidal.spark.sources.staged import StagedSourceReader

__all__ = ["CONNECTOR", "SourcerSource"]


class _Output:
    """What pynumaflow's ``NonBlockingIterator`` is to a ``read_handler``: ``await put(message)``."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    async def put(self, item: Any) -> None:
        self.items.append(item)


class SourcerSource:
    """A pynumaflow ``Sourcer`` as a Tidal user source (:class:`tidal.contracts.Source`)."""

    def __init__(self, obj: Any, path: str, timeout_ms: int = 1000) -> None:
        self._sourcer = obj() if isinstance(obj, type) else obj
        for method in ("read_handler", "ack_handler", "pending_handler"):
            if not callable(getattr(self._sourcer, method, None)):
                raise TypeError(
                    f"{path}: {type(self._sourcer).__name__} has no {method} (not a pynumaflow Sourcer)"
                )
        self._timeout_ms = timeout_ms
        self._offsets: dict[str, Any] = {}  # Tidal's offset → the source's Offset, until acknowledged

    def read(self, n: int) -> list[tuple[str, bytes, Any]]:
        from pynumaflow.sourcer import ReadRequest

        out = _Output()
        _call(self._sourcer.read_handler(ReadRequest(num_records=n, timeout_in_ms=self._timeout_ms), out))
        read = []
        for message in out.items:
            offset = message.offset
            raw = bytes(offset.offset)
            try:
                text = raw.decode()
            except UnicodeDecodeError:
                text = raw.hex()
            key = f"{offset.partition_id}:{text}"
            self._offsets[key] = offset
            read.append((key, bytes(message.payload), message.event_time))
        return read

    def ack(self, offsets: Any) -> None:
        from pynumaflow.sourcer import AckRequest

        known = [self._offsets.pop(str(o)) for o in offsets if str(o) in self._offsets]
        if known:
            _call(self._sourcer.ack_handler(AckRequest(offsets=known)))

    def nack(self, offsets: Any) -> None:
        """``nack_handler`` for offsets read and not stored (:meth:`StagedSourceReader._nack`):
        the source may give them again. A Sourcer without one is left alone."""
        from pynumaflow.sourcer import NackRequest

        known = [self._offsets.pop(str(o)) for o in offsets if str(o) in self._offsets]
        handler = getattr(self._sourcer, "nack_handler", None)
        if known and callable(handler):
            _call(handler(NackRequest(offsets=known)))

    def pending(self) -> float | None:
        response = _call(self._sourcer.pending_handler())
        count = getattr(response, "count", None)
        return None if count is None or count < 0 else float(count)


class SourcerConnector(SourceConnector):
    kind = "pynumaflow"

    def reader(self, config: QueryConfig) -> StagedSourceReader:
        from tidal.spec.validate import resolve  # not at the top: a task's worker never needs the spec

        assert config.source is not None and config.source.pynumaflow is not None
        at = f"vertices[{config.vertex}].source.pynumaflow"
        sourcer = SourcerSource(resolve(config.source.pynumaflow, at, "class"), at)
        return StagedSourceReader(config, contracts.check_source(sourcer, at))


CONNECTOR = SourcerConnector()
