"""Numaflow's side-input examples as pynumaflow handlers Tidal runs (``docs/numaflow.md``, "Side inputs").

- :class:`ExampleSideInput`: numaflow-python's ``simple_sideinput`` retriever (image
  ``numaflow-python/sideinput-example``): ``an example: <time>``, broadcast every other call.
- :class:`SideInputHandler`: its map UDF (``numaflow-python/udf-sideinput-example``), which
  answers each message with the side input ``myticker``'s value. Numaflow's reads the file in a
  watcher thread that its ``__main__`` starts; Tidal imports the module without running
  ``__main__``, so this one reads the file when it changes, at the call: what a handler does here.
- :class:`EvenOddTicker` and :func:`map_side_input`: Numaflow's map side-input e2e
  (``test/sideinputs-e2e``, images ``numaflow-go/map-sideinput`` and ``map-sideinput-udf``):
  the side input alternates ``even`` and ``odd``; the map appends ``-<side input>-data`` to each
  message, so a sink sees ``map-even-data`` and ``map-odd-data`` for the message ``map``.
- :func:`sink_side_input`: a pynumaflow sink that reads a side input, for Numaflow's sink
  side-input e2e (``sideinput-sink.yaml``, whose Redis sink stores what it read): each message is
  accepted "on success" with the side input's value as the message, which the sink's
  ``onSuccess`` sink receives.
- :class:`SideInputReducer`: a pynumaflow ``Reducer`` that reads a side input: each key's window
  becomes ``<count>-<myticker>``, the number of its messages and the side input's value when the
  window was reduced (Numaflow gives reduce vertices side inputs as it gives maps).
- :func:`accumulate_side_input`: a pynumaflow accumulator handler that answers each message, as
  it comes, with the side input ``myticker``'s value.
"""

from __future__ import annotations

import datetime
import os
import threading
from collections.abc import AsyncIterable, Iterator
from typing import Any

import pynumaflow.sideinput as sideinputsdk
from pynumaflow.accumulator import Datum as AccumulatorDatum
from pynumaflow.accumulator import Message as AccumulatorMessage
from pynumaflow.mapper import Datum, Mapper, Message, Messages
from pynumaflow.reducer import Datum as ReduceDatum
from pynumaflow.reducer import Message as ReduceMessage
from pynumaflow.reducer import Messages as ReduceMessages
from pynumaflow.reducer import Metadata, Reducer
from pynumaflow.sideinput import Response, SideInput
from pynumaflow.sinker import Datum as SinkDatum
from pynumaflow.sinker import Message as SinkMessage
from pynumaflow.sinker import Response as SinkResponse
from pynumaflow.sinker import Responses

__all__ = [
    "EvenOddTicker",
    "ExampleSideInput",
    "SideInputHandler",
    "SideInputReducer",
    "accumulate_side_input",
    "map_side_input",
    "read_side_input",
    "sink_side_input",
]


class _File:
    """A side input's file, read again only when it changed (a stat per call, not a read)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._stamp: tuple[str, int, int] | None = None
        self._value = b""
        self._lock = threading.Lock()

    def read(self) -> bytes:
        path = os.path.join(sideinputsdk.SIDE_INPUT_DIR_PATH, self.name)  # read at the call: Tidal sets it
        st = os.stat(path)
        stamp = (path, st.st_mtime_ns, st.st_ino)
        with self._lock:
            if stamp != self._stamp:
                with open(path, "rb") as f:
                    self._value = f.read()
                self._stamp = stamp
            return self._value


_FILES: dict[str, _File] = {}


def read_side_input(name: str) -> bytes:
    """The current value of the side input ``name``, as the file Numaflow and Tidal write holds it."""
    found = _FILES.get(name)
    if found is None:
        found = _FILES[name] = _File(name)
    return found.read()


class ExampleSideInput(SideInput):  # type: ignore[misc]  # pynumaflow ships no type information
    """numaflow-python's ``examples/sideinput/simple_sideinput/example.py``."""

    def __init__(self) -> None:
        self.counter = 0

    def retrieve_handler(self) -> Response:
        val = f"an example: {datetime.datetime.now()}"
        self.counter += 1
        if self.counter % 2 == 0:
            return Response.no_broadcast_message()  # every other call keeps the value
        return Response.broadcast_message(val.encode("utf-8"))


class SideInputHandler(Mapper):  # type: ignore[misc]
    """The simple_sideinput UDF: each message becomes the side input ``myticker``'s value."""

    watched_file = "myticker"

    def handler(self, keys: list[str], datum: Datum) -> Messages:
        messages = Messages()
        messages.append(Message(read_side_input(self.watched_file).strip()))
        return messages


class EvenOddTicker(SideInput):  # type: ignore[misc]
    """The map side-input e2e's retriever: ``odd``, ``even``, ``odd``, … one per call."""

    def __init__(self) -> None:
        self.counter = 0

    def retrieve_handler(self) -> Response:
        self.counter += 1
        return Response.broadcast_message(b"even" if self.counter % 2 == 0 else b"odd")


def map_side_input(keys: list[str], datum: Datum) -> Messages:
    """The map side-input e2e's UDF: ``<message>-<myticker>-data``."""
    value = datum.value + b"-" + read_side_input("myticker").strip() + b"-data"
    return Messages(Message(value, keys=keys))


def sink_side_input(datums: Iterator[SinkDatum]) -> Responses:
    """Each message accepted "on success" with the side input ``myticker``'s value as the message."""
    value = read_side_input("myticker").strip()
    return Responses(*(SinkResponse.as_on_success(d.id, SinkMessage(value)) for d in datums))


class SideInputReducer(Reducer):  # type: ignore[misc]
    """Each key's window as ``<count>-<myticker>``: how many messages it had, and the side input
    ``myticker``'s value as the handler read it, when the window closed."""

    async def handler(
        self, keys: list[str], datums: AsyncIterable[ReduceDatum], md: Metadata
    ) -> ReduceMessages:
        count = 0
        async for _ in datums:
            count += 1
        value = f"{count}-".encode() + read_side_input("myticker").strip()
        return ReduceMessages(ReduceMessage(value, keys=keys))


async def accumulate_side_input(datums: AsyncIterable[AccumulatorDatum], output: Any) -> None:
    """Each message, as it comes, answered with the side input ``myticker``'s value (its keys,
    event time and id kept)."""
    async for datum in datums:
        value = read_side_input("myticker").strip()
        message = AccumulatorMessage(
            value, keys=datum.keys, event_time=datum.event_time, watermark=datum.watermark, id=datum.id
        )
        await output.put(message)
