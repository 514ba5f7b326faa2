"""The pipeline spec: what a user writes in YAML (or builds in Python), validated once.

Names follow Numaflow's pipeline spec, in camelCase as in YAML (``bufferMaxLength``,
``scaleUpCooldownSeconds``); Python code reads them in snake case. Unknown keys are errors.
A typo in a scale field would otherwise silently leave the default in place. Everything
here is structure; the cross-field and graph checks are in :mod:`tidal.spec.validate`.

Deliberate differences from Numaflow:
- A UDF is a Python ``module:function`` (or a callable in the builder), not a container.
- The generator's load follows a shape (:mod:`tidal.spec.shapes`) rather than Numaflow's
  ``rpu``/``duration``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tidal.scaling.backpressure import OnFull
from tidal.scaling.flink import FlinkOptions
from tidal.scaling.limits import (
    DEFAULT_MAX_LENGTH,
    DEFAULT_READ_BATCH_SIZE,
    DEFAULT_USAGE_LIMIT,
    BufferLimits,
)
from tidal.spec.base import Model as _Model
from tidal.spec.builtins import BuiltinSpec
from tidal.spec.cluster import ClusterSpec
from tidal.spec.endpoints import (
    GeneratorSpec,
    KafkaSinkSpec,
    KafkaSourceSpec,
    SinkSpec,
    SourceSpec,
    TableSinkSpec,
    UserClassSpec,
)
from tidal.spec.flink import flink_options
from tidal.spec.rate_limit import RateLimitSpec, VertexLimits
from tidal.spec.records import IDENTIFIER, RecordsSpec, ReferenceSpec
from tidal.spec.reduce import GroupBySpec, StatePartitionsSpec
from tidal.spec.routing import ForwardConditions
from tidal.spec.side_inputs import SideInputSpec
from tidal.spec.watermark import WatermarkSpec

__all__ = [
    "DEFAULT_POLICY",
    "BuffersSpec",
    "ClusterSpec",
    "ControllerSpec",
    "CronScheduleSpec",
    "CronSpecModel",
    "EdgeSpec",
    "GeneratorSpec",
    "KafkaSinkSpec",
    "KafkaSourceSpec",
    "Limits",
    "PipelineSpec",
    "RecordsSpec",
    "ReferenceSpec",
    "ScaleSpec",
    "SinkSpec",
    "SourceSpec",
    "TableSinkSpec",
    "UdfKind",
    "UdfSpec",
    "UserClassSpec",
    "VertexSpec",
]

NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"  # a DNS label, like Numaflow's vertex names
MAX_REPLICAS = 2**31 - 1  # Numaflow's replica fields are int32
# The policy of a vertex naming none. `tidal` since issue #61's bench (docs/benchmarks.md, "The
# default becomes `tidal`"): on every trace of `tidal bench peers` Numaflow's rules were better on
# no more than one of cost and p99. A Numaflow manifest keeps `numaflow` (its `scale:` is theirs).
DEFAULT_POLICY = "tidal"


class Limits(_Model):
    """``limits:`` — Numaflow's pipeline limits, with its defaults.

    The buffer limits are validated by :class:`~tidal.scaling.limits.BufferLimits` (their one
    validator); :attr:`buffer` is that value, which the buffers, back pressure and the policies use.
    """

    buffer_max_length: int = Field(DEFAULT_MAX_LENGTH, le=2**31 - 1)
    buffer_usage_limit: float = DEFAULT_USAGE_LIMIT
    read_batch_size: int = Field(DEFAULT_READ_BATCH_SIZE, ge=1)
    # Tidal's, not Numaflow's: every vertex query's processing-time trigger. A message waits up
    # to one trigger at each hop; an idle vertex asks for input once a trigger (measured: 0.013
    # of a core per idle vertex at 0.25 s, 0.007 at 0.5 s). docs/latency.md
    trigger_seconds: float = Field(0.25, ge=0.05, le=60)
    # Numaflow's: every vertex's (but a reduce's and an HTTP source's) unless its own limits say
    # otherwise (tidal.spec.rate_limit).
    rate_limit: RateLimitSpec | None = None

    @model_validator(mode="after")
    def _buffer_limits(self) -> Limits:
        BufferLimits(self.buffer_max_length, self.buffer_usage_limit)  # raises SpecError with the path
        return self

    @property
    def buffer(self) -> BufferLimits:
        return BufferLimits(self.buffer_max_length, self.buffer_usage_limit)

    @property
    def usable_length(self) -> int:
        """``bufferMaxLength × bufferUsageLimit``: past this a buffer is full."""
        return self.buffer.usable_length


class CronScheduleSpec(_Model):
    start: str
    end: str
    min: int = Field(0, ge=0)
    max: int = Field(ge=0)


class CronSpecModel(_Model):
    timezone: str = "UTC"  # "" means UTC too, as in Numaflow
    schedules: list[CronScheduleSpec] = Field(min_length=1)


class ScaleSpec(_Model):
    """``scale:`` — Numaflow's autoscaling fields, as written.

    Only the structure is checked here; an absent field is ``None`` and takes its default from
    :class:`~tidal.scaling.NumaflowScale`, which is the one validator of the values
    (:func:`tidal.spec.validate.numaflow_scale` builds it, after Numaflow's normalisation:
    ``lookbackSeconds`` capped at 600, the deprecated ``replicasPerScale``).
    """

    disabled: bool | None = None
    min: int | None = Field(None, le=MAX_REPLICAS)
    max: int | None = Field(None, le=MAX_REPLICAS)
    lookback_seconds: float | None = None
    scale_up_cooldown_seconds: float | None = None
    scale_down_cooldown_seconds: float | None = None
    zero_replica_sleep_seconds: float | None = None
    target_processing_seconds: float | None = None
    target_buffer_availability: float | None = None
    replicas_per_scale_up: int | None = Field(None, le=MAX_REPLICAS)
    replicas_per_scale_down: int | None = Field(None, le=MAX_REPLICAS)
    replicas_per_scale: int | None = Field(None, le=MAX_REPLICAS)  # deprecated: both steps when absent
    cron: CronSpecModel | None = None


class UdfKind(StrEnum):
    MAP = "map"
    FLATMAP = "flatmap"
    FILTER = "filter"
    PYNUMAFLOW = "pynumaflow"  # a handler written for Numaflow's Python SDK (tidal.spark.query.pynumaflow)


class UdfSpec(_Model):
    """``udf:`` — a Python function (exactly one of map, flatmap, filter; or ``pynumaflow``, a
    handler written for Numaflow's Python SDK, :mod:`tidal.spark.query.pynumaflow`), or a Spark-native
    step: ``sql`` (a query over the view ``input``) or ``dataframe`` (``module:function``,
    ``DataFrame -> DataFrame``), over records with a schema (:mod:`tidal.spec.records`).

    ``batch: arrow`` hands the function a ``pyarrow`` binary array of payloads instead of one
    payload at a time. A function that raises — or runs longer than ``timeoutSeconds`` on one
    call, when that is set — is retried ``retries`` times, then the message goes to
    ``deadLetter`` when one is configured, else the vertex stops with an error naming the message
    id (never a silent drop).
    """

    map: str | Callable[..., Any] | None = None
    flatmap: str | Callable[..., Any] | None = None
    filter: str | Callable[..., Any] | None = None
    pynumaflow: str | Callable[..., Any] | None = None
    builtin: BuiltinSpec | None = None  # Numaflow's builtins: cat, filter, event times (tidal.spec.builtins)
    batch: str = Field("row", pattern="^(row|arrow)$")
    retries: int = Field(2, ge=0, le=100)
    timeout_seconds: float | None = Field(None, gt=0, le=86_400)  # per call; None = no limit
    dead_letter: SinkSpec | None = None
    sql: str | None = Field(None, min_length=1)
    dataframe: str | Callable[..., Any] | None = None
    reference: dict[str, ReferenceSpec] = Field(default_factory=dict)
    # The tags the function may put on its messages (tidal.spec.routing). Optional; when given,
    # a condition on an edge from this vertex naming another tag is a spec error.
    tags: list[str] | None = None
    # A reduce vertex: a pynumaflow Reducer or ReduceStreamer (or function) called once per key and window
    # (tidal.spec.reduce, tidal.spark.query.reduce); reduceArgs build a Reducer class, as Numaflow's
    # ReduceAsyncServer(cls, init_args=...) does.
    reduce: str | Callable[..., Any] | None = None
    reduce_args: list[Any] = Field(default_factory=list)
    group_by: GroupBySpec | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> UdfSpec:
        chosen = [
            k
            for k in (*(k.value for k in UdfKind), "sql", "dataframe", "reduce", "builtin")
            if getattr(self, k) is not None
        ]
        if len(chosen) != 1:
            raise ValueError(
                "a udf needs exactly one of map, flatmap, filter, pynumaflow, builtin, sql, dataframe, "
                f"reduce (got {chosen or 'none'})"
            )
        if (self.reduce is None) != (self.group_by is None):
            raise ValueError(
                "a reduce needs groupBy (its windows), and groupBy needs reduce (the handler that "
                "reduces each window): give both"
            )
        if self.reduce is not None and (self.batch == "arrow" or self.dead_letter is not None):
            raise ValueError("a reduce takes a window at a time: remove batch: arrow and deadLetter")
        if self.pynumaflow is not None and self.batch == "arrow":
            raise ValueError(
                "a pynumaflow handler takes Datums (a BatchMapper: a task's batch of them), not Arrow "
                "arrays: remove batch: arrow"
            )
        if self.dead_letter is not None and self.dead_letter.routed:
            raise ValueError(
                "deadLetter: a dead letter has no retryStrategy, fallback or onSuccess (a vertex's "
                "sink does): remove them"
            )
        if self.reference and self.engine == "python":
            raise ValueError(
                "reference tables are for sql and dataframe steps; a Python function reads its own"
            )
        for name in self.reference:
            if not re.match(IDENTIFIER, name) or name.lower() == "input":
                raise ValueError(f"reference name {name!r} is not a SQL identifier other than input")
        return self

    @property
    def engine(self) -> str:
        """``python`` (map, flatmap, filter, pynumaflow), ``sql``, ``dataframe`` or ``reduce``."""
        if self.reduce is not None:
            return "reduce"
        return "sql" if self.sql is not None else "dataframe" if self.dataframe is not None else "python"

    @property
    def kind(self) -> UdfKind:
        """The Python function's kind (a SQL or DataFrame step has none)."""
        if self.builtin is not None:
            return UdfKind.FILTER if self.builtin.kind == "filter" else UdfKind.MAP
        return next(k for k in UdfKind if getattr(self, k.value) is not None)

    @property
    def function(self) -> str | Callable[..., Any]:
        if self.builtin is not None:
            return self.builtin.function()
        value: str | Callable[..., Any] | None = getattr(self, self.kind.value)
        assert value is not None
        return value


class VertexSpec(_Model):
    name: str = Field(pattern=NAME_PATTERN)
    source: SourceSpec | None = None
    udf: UdfSpec | None = None
    sink: SinkSpec | None = None
    scale: ScaleSpec = Field(default_factory=ScaleSpec)
    replicas: int = Field(1, ge=0, le=MAX_REPLICAS)  # the count to start with (then the autoscaler decides)
    # None: the pipeline's ``policy``. ``numaflow``: Numaflow's rules with the ``scale:`` block.
    # ``kpa``: Knative's KPA on the arrival rate, configured by ``kpa:`` (autoscaling.knative.dev
    # annotation keys; ``target`` messages/s per replica). ``tidal``: Tidal's adaptive policy
    # (tidal.controller.adaptive), which learns capacity and start-up; ``scale.min``/``max`` bound it.
    # ``flink``: the Flink operator's autoscaler (tidal.controller.flink), bounded the same way.
    policy: str | None = Field(None, pattern="^(numaflow|kpa|tidal|flink)$")
    kpa: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # A reduce vertex's partitions: fixed once it has run, as Numaflow's are (its state is
    # partitioned by key into them); what scales is the read tasks and the executors.
    partitions: int | None = Field(None, ge=1, le=1024)
    state_partitions: StatePartitionsSpec | None = None  # moved by Tidal within these bounds
    limits: VertexLimits | None = None  # its own rateLimit (tidal.spec.rate_limit)
    side_inputs: list[str] = Field(default_factory=list)  # the side inputs it reads (tidal.spec.side_inputs)

    @field_validator("name", mode="before")
    @classmethod
    def _name_is_str(cls, v: object) -> object:
        if not isinstance(v, str):
            raise ValueError("a vertex name is a string")
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> VertexSpec:
        chosen = [k for k in ("source", "udf", "sink") if getattr(self, k) is not None]
        if self.partitions is not None and (self.udf is None or self.udf.reduce is None):
            raise ValueError(
                "partitions is a reduce vertex's (its windows' state is split into them); a buffer "
                "between other vertices is one partition: remove partitions"
            )
        if (bounds := self.state_partitions) is not None:
            if self.udf is None or self.udf.reduce is None:
                raise ValueError("statePartitions is a reduce vertex's: remove it")
            start = self.partitions or 1
            if not bounds.min <= start <= bounds.max:
                raise ValueError(
                    f"partitions {start} is outside statePartitions [{bounds.min}, {bounds.max}]: "
                    "start within the bounds"
                )
        if self.limits is not None and self.limits.rate_limit is not None:
            if self.udf is not None and self.udf.reduce is not None:
                raise ValueError(
                    "limits.rateLimit: a reduce vertex has no rate limit (Numaflow's rule): remove it"
                )
            if self.source is not None and self.source.http is not None:
                raise ValueError(
                    "limits.rateLimit: an HTTP source is not read in batches; bound it with "
                    "source.http.containerConcurrency and its scale instead"
                )
        if self.mono:
            return self  # a MonoVertex: source, optional transformer, sink (tidal.spec.mono)
        if len(chosen) != 1:
            raise ValueError(
                f"a vertex needs exactly one of source, udf, sink (got {chosen or 'none'}); a source, "
                "a transformer and a sink in one query is a MonoVertex (kind: MonoVertex)"
            )
        return self

    @property
    def mono(self) -> bool:
        """A MonoVertex: it reads a source and writes a sink in one query."""
        return self.source is not None and self.sink is not None

    @property
    def kind(self) -> str:
        if self.mono:
            return "monovertex"
        return "source" if self.source else "udf" if self.udf else "sink"


class EdgeSpec(_Model):
    from_: str = Field(alias="from")
    to: str
    records: RecordsSpec | None = None  # the pipeline's ``records`` when None
    # None: chained where the graph allows (tidal.spec.chains); false keeps the buffer; true
    # insists (a spec error where the edge cannot be chained).
    chain: bool | None = None
    # Numaflow's conditional forwarding: only messages whose tags match (tidal.spec.routing).
    conditions: ForwardConditions | None = None
    # Numaflow's: at a full buffer, hold the writer back (retryUntilSuccess) or drop the newest
    # messages for this edge and count them (discardLatest); tidal.spark.query.writer.
    on_full: OnFull = OnFull.RETRY_UNTIL_SUCCESS


class BuffersSpec(_Model):
    """``buffers:`` — ``sqlite`` (default: one file under the run directory) or ``jetstream``
    (``url`` of a server, or several comma-separated; without one, Tidal starts a local
    nats-server). ``replicas``: how many JetStream servers keep each buffer (3 on a cluster of
    three survives the loss of one; Numaflow's JetStream ISB keeps 3). 1 by default, which is
    all a single server can keep; a stream with fewer than asked is refused at start.

    ``durability`` (:mod:`tidal.isb.durability`): ``sync`` (default) acknowledges nothing
    upstream before the bytes that hold it are on the disk, so a power cut or an OS crash loses
    nothing acknowledged; ``os`` acknowledges once the operating system holds them, which any
    process crash survives and a power cut may not (docs/operations.md, "Durability").
    ``monitorUrl``: an external nats-server's monitoring address (``http://host:8222``), where
    Tidal reads whether it syncs every write (``sync_interval: always``)."""

    backend: str = Field("sqlite", pattern="^(sqlite|jetstream)$")
    url: str | None = None
    replicas: int = Field(1, ge=1, le=5)
    durability: Literal["sync", "os"] = "sync"
    monitor_url: str | None = None


class ControllerSpec(_Model):
    """``controller:`` — how often the autoscaler samples and decides.

    Numaflow evaluates each vertex about every 30 s. Tidal samples every second by default and
    decides on every sample: the Numaflow cooldowns (90 s) still pace the changes. Waking a vertex
    at zero is what needs the fast tick.
    """

    interval_seconds: float = Field(1.0, gt=0, le=60)
    # A vertex with pending messages that processed none for this long is reported stuck.
    stuck_after_seconds: float = Field(60.0, gt=0, le=86_400)
    # policy: flink's job.autoscaler.* options, by Flink's keys (tidal.spec.flink); checked at load.
    flink: dict[str, Any] = Field(default_factory=dict)

    @field_validator("flink")
    @classmethod
    def _flink(cls, value: dict[str, Any]) -> dict[str, Any]:
        flink_options(value)  # raises, naming the key and the fix
        return value

    def flink_options(self) -> FlinkOptions:
        """``policy: flink``'s options: ``flink:``'s keys over Tidal's defaults."""
        return flink_options(self.flink)


class PipelineSpec(_Model):
    name: str = Field(pattern=NAME_PATTERN)
    limits: Limits = Field(default_factory=Limits)
    buffers: BuffersSpec = Field(default_factory=BuffersSpec)
    controller: ControllerSpec = Field(default_factory=ControllerSpec)
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    vertices: list[VertexSpec] = Field(min_length=1)
    edges: list[EdgeSpec] = Field(default_factory=list)
    records: RecordsSpec | None = None  # the default of every edge that declares none
    policy: str = Field(DEFAULT_POLICY, pattern="^(numaflow|kpa|tidal|flink)$")  # of each vertex naming none
    watermark: WatermarkSpec = Field(default_factory=WatermarkSpec)  # maxDelay, idleSource
    # Numaflow's side inputs: retrievers on schedules, read by the vertices naming them.
    side_inputs: list[SideInputSpec] = Field(default_factory=list)

    def vertex(self, name: str) -> VertexSpec:
        for v in self.vertices:
            if v.name == name:
                return v
        raise KeyError(name)

    def policy_of(self, name: str) -> str:
        """The vertex's scaling policy: its own ``policy``, else the pipeline's; an HTTP source's
        is the KPA unless it names one (Knative scales request receivers)."""
        v = self.vertex(name)
        if v.policy is None and v.source is not None and v.source.http is not None:
            return "kpa"
        return v.policy or self.policy

    def limits_of(self, name: str) -> Limits:
        """The vertex's limits: the pipeline's, with what its own ``limits`` sets over them."""
        own = self.vertex(name).limits
        over = own.over() if own is not None else {}
        return self.limits.model_copy(update=over) if over else self.limits

    def rate_limit(self, name: str) -> RateLimitSpec | None:
        """The vertex's rate limit: its own, else the pipeline's (not for a reduce vertex or an
        HTTP source, which Numaflow does not limit either)."""
        v = self.vertex(name)
        if v.limits is not None and v.limits.rate_limit is not None:
            return v.limits.rate_limit
        if (v.udf is not None and v.udf.reduce is not None) or (v.source is not None and v.source.http):
            return None
        return self.limits.rate_limit

    def input_records(self, name: str) -> list[RecordsSpec | None]:
        """What each edge into ``name`` declares of its records (the pipeline's default else)."""
        return [e.records or self.records for e in self.edges if e.to == name]

    def inputs(self, name: str) -> list[str]:
        return [e.from_ for e in self.edges if e.to == name]

    def outputs(self, name: str) -> list[str]:
        return [e.to for e in self.edges if e.from_ == name]
