"""Build a pipeline in Python: the same :class:`~tidal.spec.model.PipelineSpec` as the YAML.

>>> from tidal.spec import Pipeline
>>> spec = (
...     Pipeline("demo")
...     .source("in", generator={"rate": 500, "shape": "step", "peak": 5000, "at": 30})
...     .map("upper", "tidal.examples.udfs:upper")
...     .sink("out", "blackhole")
...     .build()
... )
>>> [(e.from_, e.to) for e in spec.edges]  # no edge given: a chain in declaration order
[('in', 'upper'), ('upper', 'out')]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tidal.spec.model import PipelineSpec
from tidal.spec.validate import parse_pipeline

__all__ = ["Pipeline"]


class Pipeline:
    """A fluent builder; ``build()`` runs every check the YAML path runs."""

    def __init__(
        self,
        name: str,
        *,
        limits: Mapping[str, Any] | None = None,
        buffers: Mapping[str, Any] | None = None,
        controller: Mapping[str, Any] | None = None,
        records: Mapping[str, Any] | None = None,
        chaining: bool = True,
        watermark: Mapping[str, Any] | None = None,
        policy: str | None = None,
    ) -> None:
        """``watermark``: ``maxDelay`` and ``idleSource`` (:mod:`tidal.spec.watermark`).
        ``policy``: every vertex's that names none (default ``tidal``: ``DEFAULT_POLICY``).
        ``chaining=False``: every edge keeps its buffer (``chain: false``) unless it says
        otherwise, so each vertex is its own query (tidal.spec.chains)."""
        self._chaining = chaining
        self._top: dict[str, Any] = {"name": name}
        for key, value in (
            ("limits", limits), ("buffers", buffers), ("controller", controller), ("records", records),
            ("watermark", watermark),
        ):  # fmt: skip
            if value is not None:
                self._top[key] = dict(value)
        if policy is not None:
            self._top["policy"] = policy
        self._vertices: list[dict[str, Any]] = []
        self._edges: list[dict[str, Any]] = []

    def _add(
        self, name: str, body: dict[str, Any], scale: Mapping[str, Any] | None, replicas: int
    ) -> Pipeline:
        vertex: dict[str, Any] = {"name": name, **body, "replicas": replicas}
        if scale is not None:
            vertex["scale"] = dict(scale)
        self._vertices.append(vertex)
        return self

    def source(
        self,
        name: str,
        *,
        generator: Mapping[str, Any] | None = None,
        user: type | str | None = None,
        options: Mapping[str, Any] | None = None,
        scale: Mapping[str, Any] | None = None,
        replicas: int = 1,
        pynumaflow: type | str | None = None,
    ) -> Pipeline:
        """One of ``generator`` (its fields), ``user`` (a class, with ``options``) or
        ``pynumaflow`` (a Numaflow SDK ``Sourcer`` class)."""
        body: dict[str, Any] = {}
        if pynumaflow is not None:
            body["pynumaflow"] = pynumaflow
        if generator is not None:
            body["generator"] = dict(generator)
        if user is not None:
            body["user"] = {"class": user, "options": dict(options or {})}
        return self._add(name, {"source": body}, scale, replicas)

    def _udf(self, kind: str, name: str, function: str | Callable[..., Any], **kw: Any) -> Pipeline:
        scale, replicas = kw.pop("scale", None), kw.pop("replicas", 1)
        reads = kw.pop("sideInputs", None)  # the vertex's, not its udf's
        udf = {kind: function, **{k: v for k, v in kw.items() if v is not None}}
        self._add(name, {"udf": udf}, scale, replicas)
        if reads:
            self._vertices[-1]["sideInputs"] = list(reads)
        return self

    def side_input(
        self,
        name: str,
        retriever: str | Callable[..., Any],
        schedule: str,
        timezone: str | None = None,
    ) -> Pipeline:
        """A side input (:mod:`tidal.spec.side_inputs`): ``retriever`` a pynumaflow ``SideInput``
        run on ``schedule``; a vertex reads it with ``side_inputs=[name]``."""
        trigger = {"schedule": schedule, **({"timezone": timezone} if timezone else {})}
        self._top.setdefault("sideInputs", []).append(
            {"name": name, "pynumaflow": retriever, "trigger": trigger}
        )
        return self

    def map(self, name: str, function: str | Callable[..., Any], **kw: Any) -> Pipeline:
        """``kw``: ``batch`` ("row" | "arrow"), ``retries``, ``dead_letter``, ``scale``, ``replicas``."""
        return self._udf("map", name, function, **_snake_to_camel(kw))

    def flatmap(self, name: str, function: str | Callable[..., Any], **kw: Any) -> Pipeline:
        return self._udf("flatmap", name, function, **_snake_to_camel(kw))

    def filter(self, name: str, function: str | Callable[..., Any], **kw: Any) -> Pipeline:
        return self._udf("filter", name, function, **_snake_to_camel(kw))

    def pynumaflow(self, name: str, handler: str | Callable[..., Any], **kw: Any) -> Pipeline:
        """A handler written for Numaflow's Python SDK (``module:handler``, a function, a
        ``Mapper`` class or instance); ``kw`` as :meth:`map`, ``tags`` it may emit, and
        ``side_inputs`` it reads (:meth:`side_input`)."""
        return self._udf("pynumaflow", name, handler, **_snake_to_camel(kw))

    def reduce(
        self,
        name: str,
        handler: str | Callable[..., Any],
        *,
        window: Mapping[str, Any],
        keyed: bool = False,
        allowed_lateness: float | str = 0,
        args: Sequence[Any] = (),
        partitions: int | None = None,
        state_partitions: Mapping[str, Any] | None = None,
        **kw: Any,
    ) -> Pipeline:
        """A reduce vertex (:mod:`tidal.spec.reduce`): ``handler`` a pynumaflow ``Reducer``
        class (built with ``args``) or reduce function; ``window`` e.g. ``{"fixed": {"length":
        "10s"}}``; ``partitions`` its state partitions at the start; ``state_partitions``
        (``{"min": 1, "max": 4}``) lets the partition policy move them."""
        group = {"window": dict(window), "keyed": keyed, "allowedLateness": allowed_lateness}
        self._udf("reduce", name, handler, reduceArgs=list(args), groupBy=group, **_snake_to_camel(kw))
        if partitions is not None:
            self._vertices[-1]["partitions"] = partitions
        if state_partitions is not None:
            self._vertices[-1]["statePartitions"] = dict(state_partitions)
        return self

    def sql(self, name: str, query: str, **kw: Any) -> Pipeline:
        """A SQL step over the view ``input``; ``kw``: ``reference`` ({name: {path: …}}),
        ``dead_letter``, ``scale``, ``replicas``."""
        return self._udf("sql", name, query, **_snake_to_camel(kw))

    def dataframe(self, name: str, function: str | Callable[..., Any], **kw: Any) -> Pipeline:
        """A DataFrame step: ``function(df) -> DataFrame``; ``kw`` as for :meth:`sql`."""
        return self._udf("dataframe", name, function, **_snake_to_camel(kw))

    def sink(
        self,
        name: str,
        kind: str = "log",
        *,
        path: str | None = None,
        user: type | str | None = None,
        options: Mapping[str, Any] | None = None,
        scale: Mapping[str, Any] | None = None,
        replicas: int = 1,
        handler: str | Callable[..., Any] | None = None,
        side_inputs: Sequence[str] = (),
    ) -> Pipeline:
        """``kind``: log, file (``path``), blackhole, user (``user`` class with ``options``), or
        pynumaflow (``handler``: a Numaflow SDK ``Sinker`` or sink function, which may read
        ``side_inputs``)."""
        body: dict[str, Any]
        if handler is not None:
            body = {"pynumaflow": handler}
        elif user is not None:
            body = {"user": {"class": user, "options": dict(options or {})}}
        elif kind == "file":
            body = {"file": {"path": path}}
        else:
            body = {kind: {}}
        self._add(name, {"sink": body}, scale, replicas)
        if side_inputs:
            self._vertices[-1]["sideInputs"] = list(side_inputs)
        return self

    def edge(
        self,
        source: str,
        to: str,
        *,
        schema: str | None = None,
        chain: bool | None = None,
        tags: Sequence[str] | None = None,
        operator: str = "or",
    ) -> Pipeline:
        """An edge; ``schema`` declares its records as JSON with that Spark DDL schema; ``chain``
        as the edge's ``chain:`` key (None: chained where the graph allows); ``tags`` (with
        ``operator``: or, and, not) makes it conditional (:mod:`tidal.spec.routing`)."""
        edge: dict[str, Any] = {"from": source, "to": to}
        if chain is not None:
            edge["chain"] = chain
        if tags is not None:
            edge["conditions"] = {"tags": {"operator": operator, "values": list(tags)}}
        if schema is not None:
            edge["records"] = {"format": "json", "schema": schema}
        self._edges.append(edge)
        return self

    def chain(self, *names: str) -> Pipeline:
        for a, b in itertools.pairwise(names):
            self.edge(a, b)
        return self

    def build(self) -> PipelineSpec:
        edges = self._edges
        if not edges and len(self._vertices) > 1:
            names = [v["name"] for v in self._vertices]
            edges = [{"from": a, "to": b} for a, b in itertools.pairwise(names)]
        if not self._chaining:
            edges = [{"chain": False, **e} for e in edges]
        return parse_pipeline({**self._top, "vertices": self._vertices, "edges": edges})


def _snake_to_camel(kw: dict[str, Any]) -> dict[str, Any]:
    out = dict(kw)
    if "dead_letter" in out:
        out["deadLetter"] = out.pop("dead_letter")
    if "side_inputs" in out:
        out["sideInputs"] = out.pop("side_inputs")
    return out
