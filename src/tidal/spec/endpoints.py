"""A vertex's ends: ``source:`` and ``sink:`` (and a UDF's ``deadLetter``, a sink too).

Part of the pipeline spec (:mod:`tidal.spec.model`, which re-exports every name here): the
structure of each source and sink a pipeline can name, with the checks that belong to one field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field, field_validator, model_validator

from tidal import errors
from tidal.spec.base import Model as _Model
from tidal.spec.http import HttpSourceSpec
from tidal.spec.retry import OnFailure, RetryStrategySpec
from tidal.spec.routing import ForwardConditions
from tidal.spec.shapes import LoadShape, Shape

__all__ = [
    "SINK_KINDS",
    "SOURCE_KINDS",
    "STAGED_SOURCES",
    "GeneratorSpec",
    "JetStreamSourceSpec",
    "KafkaSinkSpec",
    "KafkaSourceSpec",
    "NatsSourceSpec",
    "SinkSpec",
    "SourceSpec",
    "TableSinkSpec",
    "UserClassSpec",
]

MAX_RATE = 1e9  # messages/s: far above what any generator on one machine produces


class GeneratorSpec(_Model):
    """``source.generator`` — deterministic messages at a rate that follows a load shape."""

    rate: float = Field(100.0, ge=0, le=MAX_RATE)
    shape: Shape = Shape.CONSTANT
    peak: float = Field(0.0, ge=0, le=MAX_RATE)
    at: float = Field(0.0, ge=0)
    duration: float = Field(0.0, ge=0)
    period: float = Field(60.0, gt=0)
    msg_size: int = Field(100, ge=1, le=1_000_000)
    max_messages: int | None = Field(None, ge=0, le=2**63 - 1)  # stop after this many (tests, demos)

    def load_shape(self) -> LoadShape:
        """The rate over time these fields describe."""
        return LoadShape(self.shape, self.rate, self.peak, self.at, self.duration, self.period)


class UserClassSpec(_Model):
    """A user's class, ``module:Class``, built with ``options`` as keyword arguments."""

    class_: str | type = Field(alias="class")
    options: dict[str, Any] = Field(default_factory=dict)


class KafkaSourceSpec(_Model):
    """``source.kafka`` — a topic read by offset ranges, scaled on consumer lag (docs/kafka.md).

    ``consumer`` passes librdkafka settings through; a value written ``${NAME}`` is read from the
    environment when the client is built (and never logged), e.g. ``sasl.password: ${KAFKA_PASSWORD}``.
    """

    bootstrap_servers: str = Field(min_length=1)
    topic: str = Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")
    group_id: str = Field(min_length=1)
    starting_offsets: str = Field("earliest", pattern="^(earliest|latest)$")
    consumer: dict[str, str | int | float | bool] = Field(default_factory=dict)
    read_timeout_seconds: float = Field(60.0, gt=0, le=3600)  # a task that gets nothing this long fails

    @field_validator("consumer")
    @classmethod
    def _not_ours(cls, consumer: dict[str, Any]) -> dict[str, Any]:
        ours = {"bootstrap.servers", "group.id", "enable.auto.commit", "auto.offset.reset"}
        taken = sorted(ours & set(consumer))
        if taken:
            raise ValueError(
                f"{', '.join(taken)}: set by Tidal (bootstrapServers, groupId, startingOffsets; offsets are "
                "committed by Tidal after each micro-batch): remove them from consumer"
            )
        return consumer


class JetStreamSourceSpec(_Model):
    """``source.jetstream`` — a NATS JetStream stream read by a durable pull consumer (Numaflow's
    ``jetstream`` source, :mod:`tidal.spark.sources.jetstream`): staged, acknowledged once stored.

    ``consumer`` names the durable consumer (default ``tidal-<pipeline>-<vertex>-<stream>``; made
    if the stream has none of that name, so a restart goes on from what it acknowledged).
    ``user``/``password`` or ``token`` authenticate; ``${NAME}`` values come from the environment.
    """

    url: str = Field(min_length=1)  # nats://host:4222, several separated by commas
    stream: str = Field(pattern=r"^[^.*>\s]{1,255}$")
    consumer: str | None = Field(None, pattern=r"^[^.*>\s]{1,255}$")
    deliver_policy: str = Field("all", pattern="^(all|new|last|last_per_subject)$")
    filter_subjects: list[str] = Field(default_factory=list)
    user: str | None = None
    password: str | None = None
    token: str | None = None
    fetch_timeout_seconds: float = Field(0.2, gt=0, le=60)  # how long a read waits for a first message


class NatsSourceSpec(_Model):
    """``source.nats`` — a core NATS subject, queue-subscribed (Numaflow's ``nats`` source,
    :mod:`tidal.spark.sources.nats`): staged, at most once into the pipeline (core NATS keeps
    nothing, so there is nothing to acknowledge or redeliver).

    ``queue`` is the queue group: every run (and Numaflow pod) subscribed with the same group
    shares the subject, each message going to one of them. ``user``/``password`` or ``token``
    authenticate; ``${NAME}`` values come from the environment. ``tls`` and ``nkey`` are named
    only to be refused with the reason (Numaflow's manifest has them; Tidal's client does not).
    """

    url: str = Field(min_length=1)  # nats://host:4222, several separated by commas
    subject: str = Field(pattern=r"^[^\s]{1,255}$")  # wildcards (*, >) allowed, as in a subscription
    queue: str = Field(pattern=r"^[^.*>\s]{1,255}$")
    user: str | None = None
    password: str | None = None
    token: str | None = None
    read_timeout_seconds: float = Field(0.2, gt=0, le=60)  # how long a read waits for a first message
    tls: dict[str, Any] | None = None
    nkey: Any = None

    @model_validator(mode="after")
    def _refused(self) -> NatsSourceSpec:
        # Raised as a SpecError naming the leaf, so the value (an NKey seed is a secret) is not shown.
        if self.tls is not None:
            raise errors.SpecError(
                "tls",
                "TLS to the NATS server is not supported by Tidal's NATS source",
                "remove tls and reach the server without it, or read it through a pynumaflow Sourcer",
            )
        if self.nkey is not None:
            raise errors.SpecError(
                "nkey", "NKey authentication is not supported by Tidal", "use token, or user and password"
            )
        return self


SOURCE_KINDS = ("generator", "user", "kafka", "http", "pynumaflow", "jetstream", "nats")
# Read on the driver into a staging buffer, acknowledged upstream once stored there.
STAGED_SOURCES = frozenset({"user", "pynumaflow", "jetstream", "nats"})


class SourceSpec(_Model):
    """``source:``: exactly one kind. Each kind's connector is one module of
    :mod:`tidal.spark.sources`, registered by this field's name."""

    generator: GeneratorSpec | None = None
    user: UserClassSpec | None = None
    kafka: KafkaSourceSpec | None = None
    http: HttpSourceSpec | None = None
    # A Numaflow SDK Sourcer (module:Class), read through the staging buffer as a user source is.
    pynumaflow: str | type | None = None
    jetstream: JetStreamSourceSpec | None = None
    nats: NatsSourceSpec | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> SourceSpec:
        chosen = [k for k in SOURCE_KINDS if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(
                f"a source needs exactly one of {', '.join(SOURCE_KINDS)} (got {chosen or 'none'})"
            )
        return self

    @property
    def kind(self) -> str:
        """The one kind this source is (its field's name)."""
        return next(k for k in SOURCE_KINDS if getattr(self, k) is not None)

    @property
    def staged(self) -> bool:
        """A source Tidal reads into a staging buffer before it acknowledges it upstream."""
        return self.kind in STAGED_SOURCES


class TableSinkSpec(_Model):
    """``sink.parquet`` / ``sink.delta``: a table at ``path`` (relative: under the run directory).

    ``format: json`` makes each JSON-object payload a row of columns (with ``id``); ``bytes``
    writes ``id`` and ``payload``. ``partitionBy`` names payload fields (JSON only) whose values
    become ``field=value`` directories (Parquet) or Delta partition columns.
    """

    path: str = Field(min_length=1)
    format: str = Field("json", pattern="^(json|bytes)$")
    partition_by: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _partitions_need_fields(self) -> TableSinkSpec:
        if self.partition_by and self.format != "json":
            raise ValueError("partitionBy needs format: json (the partition values are payload fields)")
        return self


class KafkaSinkSpec(_Model):
    """``sink.kafka``: an idempotent producer, at least once (docs/kafka.md)."""

    bootstrap_servers: str = Field(min_length=1)
    topic: str = Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")
    key_field: str | None = None  # a JSON payload field to key by; else the message id
    producer: dict[str, str | int | float | bool] = Field(default_factory=dict)


SINK_KINDS = ("log", "file", "blackhole", "user", "parquet", "delta", "kafka", "pynumaflow")


class BypassSpec(_Model):
    """A MonoVertex's ``bypass`` (Numaflow's): messages whose tags match go straight to the sink,
    its fallback or its onSuccess sink, without being offered to the primary first."""

    sink: ForwardConditions | None = None
    fallback: ForwardConditions | None = None
    on_success: ForwardConditions | None = None


class SinkSpec(_Model):
    """``sink:`` (and a UDF's ``deadLetter``): exactly one of log, file, blackhole, user,
    parquet, delta, kafka, pynumaflow (a Numaflow SDK ``Sinker`` or sink function,
    :mod:`tidal.spark.sinks.pynumaflow`: at least once).

    Numaflow's failure routing (:mod:`tidal.spark.sinks.routes`): ``retryStrategy``, a
    ``fallback`` sink for what the sink refused after its retries (or answered "fallback"), an
    ``onSuccess`` sink for what a pynumaflow sink answered "on success". Neither of those two
    may have its own (Numaflow's ``AbstractSink``)."""

    log: dict[str, Any] | None = None
    file: dict[str, Any] | None = None
    blackhole: dict[str, Any] | None = None
    user: UserClassSpec | None = None
    parquet: TableSinkSpec | None = None
    delta: TableSinkSpec | None = None
    kafka: KafkaSinkSpec | None = None
    pynumaflow: str | Callable[..., Any] | None = None
    retry_strategy: RetryStrategySpec | None = None
    fallback: SinkSpec | None = None
    on_success: SinkSpec | None = None
    bypass: BypassSpec | None = None  # a MonoVertex's (its top-level bypass:, moved here)

    @model_validator(mode="after")
    def _exactly_one(self) -> SinkSpec:
        chosen = [k for k in SINK_KINDS if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(f"a sink needs exactly one of {', '.join(SINK_KINDS)} (got {chosen or 'none'})")
        if self.file is not None and not isinstance(self.file.get("path"), str):
            raise ValueError("file sink needs path: a file name for the JSON lines")
        for name, other in (("fallback", self.fallback), ("onSuccess", self.on_success)):
            if other is not None and other.routed:
                raise ValueError(
                    f"{name}: a {name} sink cannot have its own retryStrategy, fallback, onSuccess or bypass "
                    "(Numaflow's AbstractSink): remove them from it"
                )
        bypass = self.bypass
        if bypass is not None and bypass.fallback is not None and self.fallback is None:
            raise ValueError(
                "bypass.fallback routes to a fallback sink, and none is given: add sink.fallback"
            )
        if bypass is not None and bypass.on_success is not None and self.on_success is None:
            raise ValueError(
                "bypass.onSuccess routes to an onSuccess sink, and none is given: add sink.onSuccess"
            )
        strategy = self.retry_strategy
        if strategy is not None and strategy.on_failure == OnFailure.FALLBACK and self.fallback is None:
            raise ValueError(
                "retryStrategy.onFailure is fallback but no fallback sink is given: add sink.fallback, "
                "or choose onFailure retry or drop"
            )
        return self

    @property
    def routed(self) -> bool:
        """Whether Numaflow's failure routing applies (a retry strategy, a fallback or onSuccess)."""
        return any(x is not None for x in (self.retry_strategy, self.fallback, self.on_success, self.bypass))

    @property
    def kind(self) -> str:
        return next(k for k in SINK_KINDS if getattr(self, k) is not None)
