"""The sink seam: what every sink kind implements, and the registry that maps ``sink:``'s kinds to them.

A sink has two halves, like a Spark writer: :meth:`Sink.write` runs in each task with that task's
messages and returns something small for the driver; :meth:`Sink.commit` runs once per
micro-batch in the driver after every task succeeded. A kind is one module with a builder,
``build(spec, place) -> Sink``, named in :data:`SINKS` with its delivery guarantee; the module is
imported only when a run uses the kind (a task's worker never pays for pyarrow's Parquet writer or
librdkafka unless its sink needs them).

**Adding a sink kind**: its spec model and field in ``SinkSpec`` (:mod:`tidal.spec.endpoints`), a
module in this room with its builder, and one line in :data:`SINKS`. The writer
(:mod:`tidal.spark.query.writer`) knows no kind by name. A kind whose storage a power cut can
leave unreadable (a write that is not synced yet, by a library that never syncs) names a
``repair`` too: :func:`repair_sinks` calls it at the run's start, before anything else can stop
the run, so no sink is left torn, not even by a run that refuses its damaged directory.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tidal.spec.model import PipelineSpec, SinkSpec

__all__ = ["SINKS", "Sink", "SinkKind", "SinkPlace", "build_sink", "repair_sinks"]


@runtime_checkable
class Sink(Protocol):
    def write(self, ids: Any, payloads: Any, errors: Sequence[str] = ()) -> Any:
        """Called in a task with Arrow arrays (``string`` ids, ``binary`` payloads) or lists;
        returns a small picklable value for :meth:`commit` (or None). A sink with
        ``takes_times = True`` is also handed the messages' source times (``times=``)."""
        ...

    def commit(self, batch_id: int, parts: Sequence[Any]) -> None:
        """Called in the driver once every task of ``batch_id`` succeeded."""
        ...


@dataclass(frozen=True)
class SinkPlace:
    """Where a sink is built: for which vertex, in which run directory, as which spec field
    (``at``, for errors), and as the vertex's ``sink`` or its ``dead-letter`` (separate state)."""

    vertex: str
    run_dir: str
    at: str
    role: str = "sink"

    def path(self, value: str) -> Path:
        """A path from the spec: relative ones are under the run directory."""
        p = Path(value)
        return p if p.is_absolute() else Path(self.run_dir) / p

    def state_dir(self) -> Path:
        """The sink's own state in the run directory (one per vertex and role)."""
        return Path(self.run_dir) / "sinks" / f"{self.vertex}.{self.role}"


@dataclass(frozen=True)
class SinkKind:
    """One kind of sink: its builder (``module:function``) and what it guarantees."""

    builder: str
    guarantee: str  # "exactly once", "at least once", "none": docs/operations.md says why
    repair: str | None = None  # module:function, (spec, place) -> what it mended, at a run's start

    def build(self, spec: SinkSpec, place: SinkPlace) -> Sink:
        return _function(self.builder)(spec, place)  # type: ignore[no-any-return]

    def mend(self, spec: SinkSpec, place: SinkPlace) -> list[str]:
        return [] if self.repair is None else list(_function(self.repair)(spec, place))


def _function(path: str) -> Callable[[SinkSpec, SinkPlace], Any]:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


_HERE = "tidal.spark.sinks"
SINKS: dict[str, SinkKind] = {
    "blackhole": SinkKind(f"{_HERE}.files:blackhole", "none"),
    "log": SinkKind(f"{_HERE}.files:log_sink", "at least once"),
    "file": SinkKind(f"{_HERE}.files:file_sink", "exactly once"),
    "user": SinkKind(f"{_HERE}.files:user_sink", "at least once"),
    "parquet": SinkKind(f"{_HERE}.tables:parquet", "exactly once"),
    "delta": SinkKind(f"{_HERE}.tables:delta", "exactly once", repair=f"{_HERE}.tables:repair_delta"),
    "kafka": SinkKind(f"{_HERE}.kafka:build", "at least once"),
    "pynumaflow": SinkKind(f"{_HERE}.pynumaflow:build", "at least once"),
}


def build_sink(spec: SinkSpec, vertex: str, run_dir: str | Path, at: str, role: str = "sink") -> Sink:
    """The sink ``spec`` describes, for ``vertex`` (``at`` names the spec field in errors;
    ``role`` is ``sink`` or ``dead-letter``, which keep separate state). The file, Parquet and
    Delta sinks commit a batch only once its bytes and names are on the disk, whatever
    ``buffers.durability`` says: a sink must never hold a torn batch after a power cut, and a
    sync per file per batch costs little next to writing it.

    A spec with a ``retryStrategy``, ``fallback`` or ``onSuccess`` is built as a
    :class:`~tidal.spark.sinks.routes.RoutedSink` over its sinks (roles ``fallback`` and
    ``on-success`` keep their own state)."""
    place = SinkPlace(vertex, str(run_dir), at, role)
    sink = SINKS[spec.kind].build(spec, place)
    if not spec.routed:
        return sink
    from tidal.spark.sinks.routes import RoutedSink
    from tidal.spec.retry import RetryStrategySpec

    fallback, on_success = (
        None if s is None else SINKS[s.kind].build(s, SinkPlace(vertex, place.run_dir, where, role))
        for s, where, role in _routed(spec, at)
    )
    return RoutedSink(
        sink,
        fallback,
        on_success,
        spec.retry_strategy or RetryStrategySpec(),
        place.state_dir(),
        at,
        bypass=spec.bypass,
    )


def _routed(spec: SinkSpec, at: str) -> list[tuple[SinkSpec | None, str, str]]:
    """A sink's fallback and onSuccess sinks: (spec or None, its field for errors, its role)."""
    return [(spec.fallback, f"{at}.fallback", "fallback"), (spec.on_success, f"{at}.onSuccess", "on-success")]


def repair_sinks(spec: PipelineSpec, run_dir: str | Path) -> list[str]:
    """Mend every sink of the pipeline whose kind has a ``repair`` (a vertex's sink, its fallback
    and onSuccess sinks, a UDF's dead letter): what each mended, for the run's log."""
    done: list[str] = []
    for v in spec.vertices:
        at = f"vertices[{v.name}]"
        found: list[tuple[SinkSpec | None, str, str]] = []
        if v.sink is not None:
            found += [(v.sink, f"{at}.sink", "sink"), *_routed(v.sink, f"{at}.sink")]
        if v.udf is not None:
            found += [(v.udf.dead_letter, f"{at}.udf.deadLetter", "dead-letter")]
        for sink, where, role in found:
            if sink is not None:
                done += SINKS[sink.kind].mend(sink, SinkPlace(v.name, str(run_dir), where, role))
    return done
