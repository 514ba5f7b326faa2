"""What one vertex's Spark query needs to know, in one picklable value: configuration only.

Spark hands a Python data source its options as strings, and builds the reader and the writer
in Python processes the JVM starts. A :class:`QueryConfig` travels as one option (``config``,
cloudpickled and base64-encoded), so a UDF or a user class given as a Python object in the
builder reaches the workers as it is, and every process sees the same facts: the buffers to
read and write, the vertex's source, UDF or sink, and where the run keeps its state.

**Cheap to decode.** PySpark creates every query's writer anew at every micro-batch, in a Python
worker of its own (forked from its daemon when none is idle), which decodes the configuration. So the
configuration's own module imports little, and the pipeline's specs (pydantic models, which cost about
half a second to import) travel as a nested pickle that is opened only where a spec is read: in
the tasks and the reader, which live on. Importing ``tidal.spark.query.datasource`` went from 1.0 s to
about 0.05 s past pyspark's own (measured with ``python -X importtime``).

The stores a query opens from it are :mod:`tidal.spark.batch.stores`'s job; what a micro-batch may take
is :mod:`tidal.spark.batch.admission`'s.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, cast

from pyspark import cloudpickle

from tidal.isb.durability import DEFAULT, Durability

if TYPE_CHECKING:
    from tidal.spark.batch.idle import IdleWatch
    from tidal.spec.model import Limits, SinkSpec, SourceSpec, UdfSpec, VertexSpec
    from tidal.spec.rate_limit import RateLimitSpec

__all__ = ["OPTION", "QueryConfig", "input_buffer", "staged_buffer"]

ROWS_OPTION = "rows"  # read without decoding the config: the data source's schema depends on it
OPTION = "config"  # the data source option that carries the encoded QueryConfig


def staged_buffer(vertex: str) -> str:
    """Where a user source's messages are made replayable. ``_`` is never in a vertex name."""
    return f"staged_{vertex}"


def input_buffer(vertex: VertexSpec) -> str | None:
    """The buffer a vertex's query reads: its own (named after it) for a UDF or sink, the
    staging buffer for a user source, none for the generator."""
    if vertex.source is None:
        return vertex.name
    if vertex.source is not None and vertex.source.staged:
        return staged_buffer(vertex.name)
    return None


class QueryConfig:
    """What one vertex's query needs: its buffers, its source, UDF or sink, the run's state."""

    def __init__(
        self,
        pipeline: str,
        vertex: str,
        db: str,  # the run's SQLite file: the control record, and the buffers when backend is sqlite
        run_dir: str,
        input: str | None,  # the buffer the vertex reads (None for a generator)
        outputs: tuple[str, ...] = (),
        limits: Limits | None = None,
        backend: str = "sqlite",
        url: str | None = None,
        source: SourceSpec | None = None,
        udf: UdfSpec | None = None,
        sink: SinkSpec | None = None,
        schema: str | None = None,  # the input's records schema (Spark DDL), for a SQL or DataFrame step
        # A chain's vertices after this one (tidal.spec.chains), in order, each with its function
        # (None: the chain's sink). ``outputs`` and ``sink`` are then the chain's tail's.
        followers: tuple[tuple[str, UdfSpec | None], ...] = (),
        # Each output's conditions (tidal.spec.routing.Route; None: every message), as ``outputs``.
        routes: tuple[tuple[str, tuple[str, ...]] | None, ...] = (),
        durability: Durability = DEFAULT,  # buffers.durability (tidal.isb.durability)
        rate_limit: RateLimitSpec | None = None,  # the head's (tidal.spec.rate_limit)
        # Per output, whether its edge says onFull: discardLatest (drop at a full buffer).
        discard: tuple[bool, ...] = (),
        # Per output, whether other vertices write it too (a join's input buffer): admission
        # claims its room there (tidal.spark.batch.admission).
        shared: tuple[bool, ...] = (),
        # The vertex sets its own readBatchSize: a live edit of the pipeline's does not change it.
        own_batch_size: bool = False,
        # A reduce's inputs (the vertices of its edges in): one watermark each, the minimum rules.
        origins: tuple[str, ...] = (),
        max_delay: float = 0.0,  # watermark.maxDelay, added to a reduce's allowedLateness
        idle: IdleWatch | None = None,  # watermark.idleSource, for a reduce (tidal.spark.batch.idle)
        # The side inputs the query's vertices read (tidal.spark.batch.side_inputs): its batches
        # wait until each has a value, and carry the values to the tasks (a reduce's tasks fetch
        # them: tidal.spark.batch.side_input_relay).
        side_inputs: tuple[str, ...] = (),
        # The run's id (tidal.spark.batch.rundir.run_id), read on the driver: it names the run's
        # side-input directory on every host, where a task cannot read the run directory.
        run_id: str = "",
    ) -> None:
        if limits is None:
            from tidal.spec.model import Limits

            limits = Limits()
        self.pipeline = pipeline
        self.vertex = vertex
        self.db = db
        self.run_dir = run_dir
        self.run_id = run_id
        self.input = input
        self.outputs = tuple(outputs)
        self.routes = tuple(routes) or (None,) * len(self.outputs)
        if len(self.routes) != len(self.outputs):
            raise ValueError(f"{len(self.routes)} routes for {len(self.outputs)} outputs")
        self.discard = tuple(discard) or (False,) * len(self.outputs)
        self.shared = tuple(shared) or (False,) * len(self.outputs)
        self.own_batch_size = own_batch_size
        self.origins = tuple(origins)
        self.max_delay = max_delay
        self.idle = idle
        self.side_inputs = tuple(side_inputs)
        self.backend = backend
        self.url = url
        self.durability: Durability = durability
        self.schema = schema
        # A SQL or DataFrame step: its query carries rows (id, payload) through Spark, not task ranges.
        self.rows = udf is not None and udf.engine != "python"
        # A reduce vertex: its rows carry source times and keys into Spark's windows
        # (tidal.spark.query.reduce).
        self.reduce = udf is not None and udf.engine == "reduce"
        # The chain's vertex names, this one first (just this one when it is not chained).
        self.members: tuple[str, ...] = (vertex, *(name for name, _ in followers))
        self._specs: dict[str, Any] | None = {
            "limits": limits,
            "source": source,
            "udf": udf,
            "sink": sink,
            "followers": tuple(u for _, u in followers),
            "rate_limit": rate_limit,
        }
        self._packed: bytes | None = None

    def __repr__(self) -> str:
        return (
            f"QueryConfig({self.pipeline!r}, {'>'.join(self.members)!r}, input={self.input!r}, "
            f"outputs={self.outputs!r})"
        )

    # -- pickling: the specs go as a nested pickle, opened on first use ------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if state["_specs"] is not None:
            state["_packed"] = _dumps(state["_specs"])
        state["_specs"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _spec(self, name: str) -> Any:
        if self._specs is None:
            assert self._packed is not None
            self._specs = cloudpickle.loads(self._packed)
        return self._specs[name]

    @property
    def limits(self) -> Limits:
        return self._spec("limits")  # type: ignore[no-any-return]

    @property
    def rate_limit(self) -> RateLimitSpec | None:
        return self._spec("rate_limit")  # type: ignore[no-any-return]

    @property
    def source(self) -> SourceSpec | None:
        return self._spec("source")  # type: ignore[no-any-return]

    @property
    def udf(self) -> UdfSpec | None:
        return self._spec("udf")  # type: ignore[no-any-return]

    @property
    def sink(self) -> SinkSpec | None:
        return self._spec("sink")  # type: ignore[no-any-return]

    @property
    def tail(self) -> str:
        """The vertex whose outputs or sink the query writes: the chain's last (or itself)."""
        return self.members[-1]

    def steps(self) -> list[tuple[str, UdfSpec | None]]:
        """Every member with its function (None: none), head first: what each task runs in turn."""
        return [(self.vertex, self.udf), *zip(self.members[1:], self._spec("followers"), strict=True)]

    @property
    def read_batch_size(self) -> int:
        return self.limits.read_batch_size

    def encode(self) -> str:
        return base64.b64encode(_dumps(self)).decode("ascii")

    @staticmethod
    def decode(text: str) -> QueryConfig:
        config = cloudpickle.loads(base64.b64decode(text))
        if not isinstance(config, QueryConfig):
            raise TypeError(f"option {OPTION!r} holds a {type(config).__name__}, not a QueryConfig")
        return config

    def options(self) -> dict[str, Any]:
        return {OPTION: self.encode(), ROWS_OPTION: "2" if self.reduce else "1" if self.rows else "0"}

    @property
    def location(self) -> str:
        """Where its buffers live: the SQLite file, or the JetStream server and pipeline."""
        return self.db if self.backend == "sqlite" else f"{self.url}/{self.pipeline}"


def _dumps(value: object) -> bytes:
    return cast(bytes, cloudpickle.dumps(value))  # type: ignore[no-untyped-call]
