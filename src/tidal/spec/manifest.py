"""Numaflow's own manifests (``apiVersion: numaflow.numaproj.io/v1alpha1``) as Tidal specs.

A Numaflow user brings a ``Pipeline`` or ``MonoVertex`` manifest as it stands; :func:`convert`
turns it into the mapping Tidal's spec reads (``tidal convert`` prints it, ``tidal run`` runs
it). What carries over:

- vertices, edges with their ``conditions``, ``scale`` (the same names) under Numaflow's own
  rules (``policy: numaflow``; Tidal's default for its own specs is ``tidal``), the pipeline's
  ``limits`` (``bufferUsageLimit`` is a percentage in Numaflow, a fraction in Tidal);
- sources (:mod:`tidal.spec.manifest_sources`): ``generator``, ``http``, ``kafka``, ``jetstream``, ``nats``,
  ``udsource``, and a source's ``transformer`` (a vertex of its own after the source, which Tidal
  chains into the source's query);
- a ``udf`` or ``transformer`` container: the pynumaflow handler that does what its image does
  (:data:`tidal.examples.numaflow.IMAGES` for Numaflow's example images), or the one the
  vertex's annotation ``tidal.dev/handler: module:handler`` or the ``handlers`` mapping (by
  vertex name or image) names;
- sinks: ``log``, ``blackhole``, ``kafka``;
- ``spec.sideInputs`` (each retriever's container named as a ``udf``'s is, by the side input's
  name or its image) and a vertex's ``sideInputs`` (:mod:`tidal.spec.manifest_side_inputs`).

What Tidal cannot honour and what it changes is listed in :attr:`Converted.ignored`, one line per
field with the reason (``tidal run`` logs them as one warning). What would change the results
silently is refused instead, naming the field and the fix:
a container without a handler, a builtin Numaflow does not have there (a UDF's are ``cat`` and
``filter``, a source transformer's ``filter``, ``eventTimeExtractor`` and
``timeExtractionFilter``: :mod:`tidal.spec.builtins`). A ``udsource`` or ``udsink``
container runs as a pynumaflow ``Sourcer`` or sink handler (``source``/``sink: {pynumaflow: …}``)
named the same way as a ``udf``'s; Numaflow's example log sinks become Tidal's log sink.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tidal import errors
from tidal.scaling.durations import spec_seconds
from tidal.spec.manifest_builtins import convert_builtin
from tidal.spec.manifest_handlers import HANDLER_ANNOTATION, HandlerFinder
from tidal.spec.manifest_side_inputs import convert_side_inputs
from tidal.spec.manifest_sources import convert_source

__all__ = ["API_GROUP", "HANDLER_ANNOTATION", "Converted", "convert", "is_manifest"]

API_GROUP = "numaflow.numaproj.io/"
_TAGS = {
    "tidal.examples.numaflow:even_odd": ["even-tag", "odd-tag"],
    "tidal.examples.numaflow:retry": ["retry"],
}
_SCALE = (
    "disabled", "min", "max", "lookbackSeconds", "scaleUpCooldownSeconds", "scaleDownCooldownSeconds",
    "zeroReplicaSleepSeconds", "targetProcessingSeconds", "targetBufferAvailability",
    "replicasPerScaleUp", "replicasPerScaleDown", "replicasPerScale",
)  # fmt: skip
# Kubernetes' side of a vertex: where its pods run and what they mount, which Spark decides here.
_POD = (
    "containerTemplate", "initContainerTemplate", "initContainers", "sidecars", "volumes", "nodeSelector",
    "tolerations", "affinity", "imagePullSecrets", "serviceAccountName", "priorityClassName", "priority",
    "securityContext", "runtimeClassName", "dnsPolicy", "dnsConfig", "resourceClaims",
    "automountServiceAccountToken", "sideInputsContainerTemplate", "daemonTemplate", "updateStrategy",
)  # fmt: skip


@dataclass
class Converted:
    """A manifest as a Tidal spec mapping, and what of it Tidal does not honour (with why)."""

    data: dict[str, Any]
    ignored: list[str] = field(default_factory=list)

    def warning(self) -> str:
        return "Numaflow fields Tidal does not honour:\n" + "\n".join(f"  - {line}" for line in self.ignored)


def is_manifest(data: Mapping[str, Any]) -> bool:
    return str(data.get("apiVersion", "")).startswith(API_GROUP)


def convert(data: Mapping[str, Any], handlers: Mapping[str, str] | None = None) -> Converted:
    """``data``, a Numaflow manifest, as Tidal's spec mapping; ``handlers`` maps a vertex name or
    an image (without its tag) to a pynumaflow handler, ``module:handler``."""
    kind = data.get("kind")
    if kind not in ("Pipeline", "MonoVertex"):
        raise errors.SpecError(
            "kind", f"{kind!r} is not a Numaflow kind Tidal runs", "give a Pipeline or a MonoVertex manifest"
        )
    name = (data.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise errors.SpecError("metadata.name", "is missing", "name the pipeline (metadata.name)")
    spec = data.get("spec")
    if not isinstance(spec, Mapping):
        raise errors.SpecError("spec", "is missing", f"a {kind} manifest has its vertices under spec")
    out = _Converter(name, dict(handlers or {}))
    result = out.mono(spec) if kind == "MonoVertex" else out.pipeline(spec)
    out.found.unused()
    return Converted(result, out.ignored)


class _Converter:
    def __init__(self, name: str, handlers: dict[str, str]) -> None:
        self.name = name
        self.found = HandlerFinder(handlers, self.skip)
        self.ignored: list[str] = []
        self.pipeline_rate_limit: Mapping[str, Any] = {}  # what a vertex's rateLimit inherits

    def skip(self, path: str, why: str) -> None:
        self.ignored.append(f"{path}: {why}")

    def sarama(self, kafka: Mapping[str, Any], at: str, keys: tuple[str, ...], instead: str) -> None:
        """Numaflow's Kafka settings are Sarama's (Go); Tidal's client is librdkafka."""
        for key in keys:
            if key in kafka:
                self.skip(f"{at}.{key}", f"Sarama's settings: give librdkafka's as {instead}")

    def watermark(self, watermark: Mapping[str, Any]) -> dict[str, Any]:
        """``spec.watermark``: ``maxDelay`` and ``idleSource`` as they are (tidal.spec.watermark);
        ``disabled`` is listed: a reduce needs its watermark to close windows."""
        out = {k: watermark[k] for k in ("maxDelay", "idleSource") if watermark.get(k) is not None}
        for key, value in watermark.items():
            if key not in ("maxDelay", "idleSource") and not (key == "disabled" and value is False):
                self.skip(f"spec.watermark.{key}", _WHY.get(f"watermark.{key}", "not used by Tidal"))
        return out

    # -- the two kinds ---------------------------------------------------------------------------

    def pipeline(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        for key in ("lifecycle", "templates", "interStepBuffer", "interStepBufferServiceName",
                    "ordered"):  # fmt: skip
            if key in spec:
                self.skip(f"spec.{key}", _WHY.get(key, "not used by Tidal"))
        # Numaflow's rules, as the manifest's `scale:` blocks are theirs (Tidal's default is `tidal`).
        out: dict[str, Any] = {"name": self.name, "policy": "numaflow"}
        watermark = self.watermark(spec.get("watermark") or {})
        if watermark:
            out["watermark"] = watermark
        self.pipeline_rate_limit = dict((spec.get("limits") or {}).get("rateLimit") or {})
        limits = self.limits(spec.get("limits") or {}, "spec.limits")
        if limits:
            out["limits"] = limits
        vertices, edges, renamed = [], [], {}
        for i, v in enumerate(spec.get("vertices") or []):
            converted, transformer = self.vertex(v, f"spec.vertices[{i}]")
            vertices.append(converted)
            if transformer is not None:  # source → its transformer, chained by Tidal
                vertices.append(transformer)
                edges.append({"from": converted["name"], "to": transformer["name"]})
                renamed[converted["name"]] = transformer["name"]
        for k, e in enumerate(spec.get("edges") or []):
            edges.append(self.edge(e, f"spec.edges[{k}]", renamed))
        out["vertices"] = vertices
        out["edges"] = edges
        if spec.get("sideInputs"):
            out["sideInputs"] = convert_side_inputs(self.found, self.skip, spec["sideInputs"])
        return out

    def mono(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "MonoVertex", "name": self.name}
        source = dict(spec.get("source") or {})
        transformer = source.pop("transformer", None)
        out["source"] = self.source(source, "spec.source", self.name, {})
        if transformer is not None and spec.get("udf"):
            raise errors.SpecError(
                "spec.udf",
                "a MonoVertex with both a source transformer and a udf: Tidal's runs one function",
                "keep one, or write the two as a Pipeline (source → transformer → udf → sink)",
            )
        if transformer is not None:
            out["transformer"] = self.udf(
                transformer, "spec.source.transformer", self.name, {}, transformer=True
            )
        elif spec.get("udf"):
            out["transformer"] = self.udf(spec["udf"], "spec.udf", self.name, {})
        out["sink"] = self.sink(spec.get("sink") or {}, "spec.sink", self.name, {})
        if "http" not in out["source"]:  # an HTTP source's is the KPA, as Knative scales receivers
            out["policy"] = "numaflow"
        if "scale" in spec:
            out["scale"] = self.scale(spec["scale"], "spec.scale")
        limits = self.limits(spec.get("limits") or {}, "spec.limits")
        if limits:
            out["limits"] = limits
        if spec.get("bypass"):
            out["bypass"] = dict(spec["bypass"])  # {sink|fallback|onSuccess: {tags: {operator, values}}}
        for key in _POD:
            if key in spec:
                self.skip(f"spec.{key}", "Kubernetes pod settings: Spark's executors run the work here")
        return out

    # -- parts -----------------------------------------------------------------------------------

    def limits(self, limits: Mapping[str, Any], at: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in limits.items():
            if key in ("readBatchSize", "bufferMaxLength"):
                out[key] = value
            elif key == "bufferUsageLimit":
                out[key] = float(value) / 100.0  # Numaflow: a percentage; Tidal: a fraction
            elif key == "rateLimit":
                out[key] = self.rate_limit(value or {}, f"{at}.rateLimit")
            else:
                self.skip(f"{at}.{key}", _WHY.get(key, "not used by Tidal"))
        return out

    def vertex_limits(self, limits: Mapping[str, Any], at: str) -> dict[str, Any]:
        """A vertex's ``limits`` (``rateLimit``, ``readBatchSize``, its buffer's length and usage)."""
        out: dict[str, Any] = {}
        for key, value in limits.items():
            if key == "rateLimit":  # Numaflow's mergeLimits: what it leaves out comes from the pipeline's
                parent = self.pipeline_rate_limit
                inherited = {k: parent[k] for k in _INHERITED if k in parent}
                out[key] = self.rate_limit({**inherited, **(value or {})}, f"{at}.rateLimit")
            elif key in ("readBatchSize", "bufferMaxLength"):
                out[key] = value
            elif key == "bufferUsageLimit":
                out[key] = float(value) / 100.0  # Numaflow: a percentage; Tidal: a fraction
            else:
                self.skip(f"{at}.{key}", _WHY.get(key, "not used by Tidal"))
        return out

    def rate_limit(self, limit: Mapping[str, Any], at: str) -> dict[str, Any]:
        """Numaflow's ``rateLimit`` (:mod:`tidal.spec.rate_limit`): durations in seconds, the modes'
        settings flattened, ``redisStore`` → ``shared``, none or ``inMemoryStore`` → ``perReplica``."""
        out: dict[str, Any] = {k: limit[k] for k in ("max", "min") if k in limit}
        if "rampUpDuration" in limit:
            out["rampUpSeconds"] = spec_seconds(
                limit["rampUpDuration"], f"{at}.rampUpDuration", positive=True
            )
        modes = dict(limit.get("modes") or {})
        for mode in ("scheduled", "onlyIfUsed", "goBackN", "relaxed"):  # Numaflow's precedence
            if mode in modes:
                out["mode"] = mode
                body = dict(modes[mode] or {})
                for key in ("thresholdPercentage", "rampDownPercentage"):
                    if key in body:
                        out[key] = body[key]
                if "coolDownPeriod" in body:
                    out["coolDownSeconds"] = spec_seconds(
                        body["coolDownPeriod"], f"{at}.modes.goBackN.coolDownPeriod", positive=True
                    )
                break
        store = dict(limit.get("store") or {})
        out["store"] = "shared" if "redisStore" in store else "perReplica"
        if "redisStore" in store:
            self.skip(
                f"{at}.store.redisStore",
                "the driver admits every replica's reads: the budget is shared there",
            )
        for key in ("resumedRampUp", "ttl"):
            if key in limit:
                self.skip(f"{at}.{key}", "a restarted run ramps up from min again")
        return out

    def scale(self, scale: Mapping[str, Any], at: str) -> dict[str, Any]:
        unknown = [k for k in scale if k not in _SCALE]
        if unknown:
            raise errors.SpecError(
                f"{at}.{unknown[0]}", "is not a Numaflow scale field", f"use {', '.join(_SCALE)}"
            )
        return dict(scale)

    def vertex(self, v: Mapping[str, Any], at: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        name = v.get("name")
        out: dict[str, Any] = {"name": name}
        annotations = ((v.get("metadata") or {}).get("annotations") or {}) if isinstance(v, Mapping) else {}
        transformer = None
        if "source" in v:
            source = dict(v["source"] or {})
            body = source.pop("transformer", None)
            out["source"] = self.source(source, f"{at}.source", str(name), annotations)
            if body is not None:
                udf = self.udf(body, f"{at}.source.transformer", f"{name}-transformer", {}, transformer=True)
                transformer = {"name": f"{name}-transformer", "udf": udf}
        elif "udf" in v:
            out["udf"] = self.udf(v["udf"], f"{at}.udf", str(name), annotations)
        elif "sink" in v:
            out["sink"] = self.sink(v["sink"], f"{at}.sink", str(name), annotations)
        if "scale" in v:
            out["scale"] = self.scale(v["scale"], f"{at}.scale")
        for key in v:
            if key in ("name", "source", "udf", "sink", "scale", "metadata"):
                continue
            if key == "limits":
                own = self.vertex_limits(v["limits"] or {}, f"{at}.limits")
                if own:
                    out["limits"] = own
            elif key == "partitions" and "groupBy" in (v.get("udf") or {}):
                out["partitions"] = v["partitions"]  # a reduce vertex's state partitions, fixed as Numaflow's
            elif key == "partitions":
                self.skip(f"{at}.partitions", _WHY["partitions"])
            elif key == "sideInputs" and v[key]:
                out["sideInputs"] = list(v[key])
            elif key in _POD:
                self.skip(f"{at}.{key}", "Kubernetes pod settings: Spark's executors run the work here")
            else:
                self.skip(f"{at}.{key}", "not used by Tidal")
        return out, transformer

    def source(
        self,
        source: Mapping[str, Any],
        at: str,
        vertex: str = "",
        annotations: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        return convert_source(self, source, at, vertex, annotations or {})

    def udf(
        self,
        udf: Mapping[str, Any],
        at: str,
        vertex: str,
        annotations: Mapping[str, Any],
        transformer: bool = False,
    ) -> dict[str, Any]:
        group = udf.get("groupBy")
        if group is not None and "storage" in group:
            self.skip(
                f"{at}.groupBy.storage", "Spark's state store, in the run's checkpoint, holds the windows"
            )
        for key in ("retryStrategy",):
            if key in udf:
                self.skip(f"{at}.{key}", "Tidal retries a failing call udf.retries times (default 2)")
        if "builtin" in udf:
            return {"builtin": convert_builtin(self, udf["builtin"] or {}, f"{at}.builtin", transformer)}
        container = udf.get("container") or {}
        runs = ("container", "handler", "module:handler (a pynumaflow handler)")
        handler = self.found.container(container, f"{at}.container", vertex, annotations, runs)
        self.container_settings(container, f"{at}.container")
        if group is not None:
            reduce = {k: v for k, v in group.items() if k != "storage"}
            return {"reduce": handler, "groupBy": reduce}
        out: dict[str, Any] = {"pynumaflow": handler}
        if handler in _TAGS:
            out["tags"] = _TAGS[handler]
        return out

    def container_settings(self, container: Mapping[str, Any], at: str) -> None:
        """A container's settings but its image (``env``, ``args``, …), listed as not honoured:
        the handler runs in Spark's Python workers. A pull policy means nothing without an image."""
        for key in container:
            if key not in ("image", "imagePullPolicy"):
                self.skip(f"{at}.{key}", _WHY.get(key, "a container setting: the handler runs in Spark"))

    def sink(
        self, sink: Mapping[str, Any], at: str, vertex: str, annotations: Mapping[str, Any]
    ) -> dict[str, Any]:
        out = self.sink_kind(sink, at, vertex, annotations)
        for key in ("fallback", "onSuccess"):
            if sink.get(key):  # its handler is mapped by image, or by "<vertex>.<key>" in a handlers file
                out[key] = self.sink_kind(sink[key], f"{at}.{key}", f"{vertex}.{key}", {})
        if sink.get("retryStrategy"):
            out["retryStrategy"] = retry_strategy(sink["retryStrategy"], f"{at}.retryStrategy")
        return out

    def sink_kind(
        self, sink: Mapping[str, Any], at: str, vertex: str, annotations: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The kind of a sink (or of its fallback or onSuccess sink), without its routing."""
        if "log" in sink:
            return {"log": {}}
        if "blackhole" in sink:
            return {"blackhole": {}}
        if "kafka" in sink:
            k = sink["kafka"] or {}
            self.sarama(k, f"{at}.kafka", ("config", "tls", "sasl", "setKey"), "sink.kafka.producer")
            return {"kafka": {"bootstrapServers": ",".join(k.get("brokers") or []), "topic": k.get("topic")}}
        if "udsink" in sink:
            container = (sink.get("udsink") or {}).get("container") or {}
            image = str(container.get("image", ""))
            named = self.found.find(image, vertex, annotations)
            if named is None and re.search(r"numaflow-(rs|go|python)/sink-log(:|$)", image):
                out: dict[str, Any] = {"log": {}}  # Numaflow's example log sinks: what Tidal's log sink does
                self.skip(f"{at}.udsink.container.image", f"no containers: {image} runs as Tidal's log sink")
            else:
                runs = ("sink", "sink", "module:handler (a pynumaflow Sinker or sink function)")
                handler = self.found.container(container, f"{at}.udsink.container", vertex, annotations, runs)
                out = {"pynumaflow": handler}
            self.container_settings(container, f"{at}.udsink.container")
            return out
        known = ", ".join(sorted(k for k in sink if k not in _ROUTING)) or "none"
        raise errors.SpecError(at, f"no sink Tidal runs (got {known})", "use log, blackhole or kafka")

    def edge(self, e: Mapping[str, Any], at: str, renamed: Mapping[str, str]) -> dict[str, Any]:
        source = e.get("from")
        out: dict[str, Any] = {"from": renamed.get(str(source), source), "to": e.get("to")}
        if e.get("conditions"):
            out["conditions"] = e["conditions"]
        if "onFull" in e:
            out["onFull"] = e["onFull"]  # retryUntilSuccess or discardLatest, as Numaflow's
        if "parallelism" in e:
            self.skip(f"{at}.parallelism", "deprecated in Numaflow; Tidal's replicas come from scale")
        return out


_ROUTING = ("fallback", "onSuccess", "retryStrategy")
_INHERITED = ("max", "min", "rampUpDuration", "store")  # a vertex's rateLimit from the pipeline's


def retry_strategy(strategy: Mapping[str, Any], at: str) -> dict[str, Any]:
    """Numaflow's ``retryStrategy`` with its durations in seconds (:mod:`tidal.spec.retry`)."""
    backoff = dict(strategy.get("backoff") or {})
    out: dict[str, Any] = {}
    if "interval" in backoff:
        out["intervalSeconds"] = spec_seconds(
            backoff.pop("interval"), f"{at}.backoff.interval", positive=True
        )
    if "cap" in backoff:
        out["capSeconds"] = spec_seconds(backoff.pop("cap"), f"{at}.backoff.cap", positive=True)
    out.update(backoff)  # steps, factor, jitter: as they are
    converted: dict[str, Any] = {"backoff": out}
    if "onFailure" in strategy:
        converted["onFailure"] = strategy["onFailure"]
    return converted


_WHY = {
    "watermark.disabled": "Tidal's reduce always keeps a watermark (Spark's); map vertices do not use one",
    "lifecycle": "pause and resume are tidal pause / tidal resume",
    "templates": "Kubernetes pod templates: Spark's executors run the work here",
    "interStepBuffer": "Tidal's buffers are set by buffers: (SQLite or JetStream)",
    "interStepBufferServiceName": "Tidal's buffers are set by buffers: (SQLite or JetStream)",
    "ordered": "Tidal keeps each buffer's order; ordered processing across partitions is not implemented",
    "partitions": "a Tidal buffer is one partition; a replica reads its own range of it",
    "readTimeout": "Tidal reads on a processing-time trigger (limits.triggerSeconds)",
    "concurrency": "a replica is one Spark task, which processes its range in order",
    "args": "container arguments: the handler is called in Spark's Python workers, with no command line",
    "command": "a container's command: the handler is called in Spark's Python workers",
    "env": "environment variables: set them for the run (the handler reads the driver's and executors')",
    "resources": "Spark's executors size the work (cluster: executorCores, executorMemory)",
}
