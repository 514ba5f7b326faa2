"""The side-input manager: each retriever called on its schedule, in the driver, its new values
kept in the run directory for the queries to carry to their tasks (and relayed through the
buffer backend for reduce vertices, :mod:`tidal.spark.batch.side_input_relay`).

Numaflow runs a side-input manager per side input (a Deployment with the retriever's container):
it calls ``retrieve_handler()`` when it starts and at every firing of the trigger, and stores a
broadcast value in a JetStream key-value bucket that each vertex's synchroniser copies to a file.
Tidal calls the retriever in a thread of the driver (:class:`SideInputManager`); the rule of when
and what is :mod:`tidal.scaling.side_inputs`, the store and the way to the executors
:mod:`tidal.spark.batch.side_inputs`. A retriever that raises, or returns something that is not
a ``Response``, keeps the value (logged); the next firing tries again, as Numaflow's does.

Each new value is one ``side-input`` event per vertex that reads it in ``events.jsonl``
(``tidal events``), with its version and size.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable
from datetime import tzinfo
from pathlib import Path
from typing import Any

from tidal import errors
from tidal.controller import EventLog
from tidal.scaling import Decision, Rule
from tidal.scaling.side_inputs import Schedule, SideInputValue, Timetable, after_response
from tidal.spark.batch.clients import run_async
from tidal.spark.batch.side_inputs import SideInputStore
from tidal.spec import PipelineSpec
from tidal.spec.side_inputs import trigger_of
from tidal.spec.validate import resolve

__all__ = ["SideInputManager", "retriever"]

log = logging.getLogger("tidal.side_inputs")


def retriever(obj: Any, path: str) -> Callable[[], Any]:
    """``obj`` (a pynumaflow ``SideInput`` class or instance, or a function) as ``call() ->
    Response``; a class is built with no arguments, as Numaflow's examples build theirs."""
    if isinstance(obj, type):
        try:
            obj = obj()
        except TypeError as exc:
            raise errors.SpecError(
                path, f"{obj.__name__}() needs arguments ({exc})", "name an instance"
            ) from None
    fn = getattr(obj, "retrieve_handler", obj)
    if not callable(fn):
        raise errors.SpecError(
            path, f"{type(obj).__name__} is not a side-input retriever", "name a pynumaflow SideInput"
        )
    if inspect.iscoroutinefunction(fn):
        return lambda: run_async(fn())
    return fn  # type: ignore[no-any-return]


class SideInputManager:
    """Calls the pipeline's retrievers on their schedules (:meth:`step` with the time, for
    tests; :meth:`start` runs it in a thread) and keeps each new value in the run directory."""

    def __init__(
        self,
        spec: PipelineSpec,
        run_dir: str | Path,
        events: EventLog | None = None,
        replicas: Callable[[str], int] | None = None,
    ) -> None:
        self.store = SideInputStore(run_dir)
        # Given every current value before a new one is stored, when a reduce vertex reads side
        # inputs (tidal.spark.batch.side_input_relay: its tasks run where no partition carried them).
        self.relay: Callable[[dict[str, SideInputValue]], None] | None = None
        self.events = events
        self.replicas = replicas or (lambda vertex: 0)
        self.readers = {
            s.name: [v.name for v in spec.vertices if s.name in v.side_inputs] for s in spec.side_inputs
        }
        schedules: dict[str, tuple[Schedule, tzinfo]] = {}
        self.calls: dict[str, Callable[[], Any]] = {}
        for k, side in enumerate(spec.side_inputs):
            at = f"sideInputs[{k}]"
            schedules[side.name] = trigger_of(side, at)
            self.calls[side.name] = retriever(
                resolve(side.pynumaflow, f"{at}.pynumaflow"), f"{at}.pynumaflow"
            )
        self.timetable = Timetable(schedules)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self, now: float) -> list[str]:
        """Run the retrievers due at ``now``; the side inputs that got a new value."""
        changed = []
        for name in self.timetable.due(now):
            try:
                if self._retrieve(name, now):
                    changed.append(name)
            finally:
                self.timetable.ran(name, now)
        return changed

    def _retrieve(self, name: str, now: float) -> bool:
        try:
            response = self.calls[name]()
            no_broadcast, value = bool(response.no_broadcast), response.value
            if not no_broadcast and not isinstance(value, bytes | bytearray):
                raise TypeError(f"Response.value must be bytes, got {type(value).__name__}")
        except Exception as exc:  # the user's code: keep the value, try at the next firing
            log.warning("side input %s: the retriever failed (%s); the value stays as it was", name, exc)
            return False
        new = after_response(self.store.read(name), no_broadcast, bytes(value or b""), now)
        if new is None:
            return False
        if self.relay is not None:  # first: a batch planned with the new value finds it relayed
            self.relay({**self.current(), name: new})
        self.store.write(name, new)
        self._record(name, new)
        return True

    def current(self) -> dict[str, SideInputValue]:
        """The values the side inputs have (those that have one)."""
        return {n: v for n in self.calls if (v := self.store.read(n)) is not None}

    def republish(self) -> None:
        """Relay the values the run directory holds (a restart, before the queries start: the
        backend may be new, or may predate the relay)."""
        if self.relay is not None and (values := self.current()):
            self.relay(values)

    def _record(self, name: str, value: SideInputValue) -> None:
        log.info("side input %s: version %d (%d bytes)", name, value.version, len(value.value))
        if self.events is None:
            return
        why = f"side input {name}: new value, version {value.version} ({len(value.value)} bytes)"
        for vertex in self.readers.get(name, []):
            count = self.replicas(vertex)
            note = Decision(
                vertex, value.at, count, count, Rule.SIDE_INPUT, why,
                {"side_input": name, "version": value.version, "bytes": len(value.value)},
            )  # fmt: skip
            self.events.record(note, news=True)

    def status(self) -> dict[str, dict[str, Any] | None]:
        """Each side input's current version, when it came and its size (None: no value yet,
        and the vertices that read it wait): ``side_inputs`` in ``status.json``."""
        out: dict[str, dict[str, Any] | None] = {}
        for name in self.calls:
            value = self.store.read(name)
            out[name] = None if value is None else {"version": value.version, "at": value.at,
                                                    "bytes": len(value.value)}  # fmt: skip
        return out

    # -- the thread --------------------------------------------------------------------------

    def start(self) -> SideInputManager:
        if self.calls:
            self._thread = threading.Thread(target=self._run, name="tidal-side-inputs", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step(time.time())
            except Exception as exc:  # a value that cannot be stored (a full disk): the next firing
                log.error("side inputs: %s; the vertices keep the values they have", exc)
            wait = self.timetable.wait(time.time())
            if wait is None:
                return  # no schedule fires again
            self._stop.wait(min(wait, 1.0))  # a clock change is noticed within a second

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
