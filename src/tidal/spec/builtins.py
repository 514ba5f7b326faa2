"""``udf.builtin``: Numaflow's builtin functions and source transformers, as Tidal runs them.

Numaflow had builtin UDFs (``cat``, ``filter``: ``pkg/udf/builtin``) and builtin source
transformers (``filter``, ``eventTimeExtractor``, ``timeExtractionFilter``:
``pkg/sources/transformer/builtin``), all removed in its 1.6 and still in older manifests. The
manifest converter makes a source's ``transformer`` a vertex of its own after the source
(``<source>-transformer``, chained into the source's query), so a builtin transformer is that
vertex's ``udf.builtin``; a MonoVertex's ``transformer`` takes it the same way.

- ``cat``: the message as it came.
- ``filter`` (``expression``): kept when the expression is true; dropped when false or when it
  fails (``filter/filter.go``: an error drops the message).
- ``eventTimeExtractor`` (``expression``, optional ``format``): the message goes on unchanged,
  with its event time (Tidal's source time, what a reduce windows it by) read from the
  expression's text by Go's ``time.Parse(format, text)``, or by dateparse without a format
  (:mod:`tidal.spec.gotime`). When the expression fails or the text does not parse, the
  message keeps its event time (``event_time/event_time_extractor.go``, ``apply``: "we pass on
  the original input event time").
- ``timeExtractionFilter`` (``filterExpr``, ``eventTimeExpr``, optional ``eventTimeFormat``):
  the filter, then the extractor on the messages it keeps
  (``time_extraction_filter/time_extraction_filter.go``). Its format is ``eventTimeFormat``, as
  Numaflow's code reads it (its docs' prose says ``format``, which Numaflow ignores).

The keys are kept throughout, as Numaflow's builtins keep them. **Tidal differs** in what it
refuses when the spec is read: an expression outside the language, a ``format`` with no element
of Go's reference time, a kwarg the builtin does not read, a missing one (Numaflow refuses only
the missing ones, when the vertex starts). A ``udf.builtin`` vertex's function is picklable: it
keeps its texts and compiles them again where it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from tidal.contracts import DROP
from tidal.spec.base import Model
from tidal.spec.expression import FilterExpression, cat, compile_filter
from tidal.spec.gotime import check_layout, parse_any, parse_layout

__all__ = ["BUILTINS", "BuiltinSpec", "EventTimeExtractor", "Stamped", "TimeExtractionFilter"]

# Each builtin's kwargs: (required, optional).
BUILTINS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cat": ((), ()),
    "filter": (("expression",), ()),
    "eventTimeExtractor": (("expression",), ("format",)),
    "timeExtractionFilter": (("filterExpr", "eventTimeExpr"), ("eventTimeFormat",)),
}
_EXAMPLES = {
    "expression": "int(json(payload).id) < 100",
    "filterExpr": "int(json(payload).id) < 100",
    "eventTimeExpr": "json(payload).item[1].time",
}
_FORMATS = {"format", "eventTimeFormat"}


@dataclass(frozen=True)
class Stamped:
    """A builtin transformer's output: the payload, with the event time it read (seconds; None
    keeps the input's) or the drop tag. The input's keys stay (``keys`` None)."""

    value: bytes
    event_time: float | None = None
    tags: tuple[str, ...] = ()
    keys: tuple[str, ...] | None = None


class _Extract:
    """An event-time expression and its layout: the time it reads off a payload, or None."""

    def __init__(self, expression: str, layout: str | None) -> None:
        self.expression = compile_filter(expression)
        self.layout = layout

    def __call__(self, payload: bytes) -> float | None:
        try:
            text = self.expression.text(payload)
            return parse_any(text) if not self.layout else parse_layout(self.layout, text)
        except Exception:  # Numaflow logs it and keeps the message's event time
            return None


class EventTimeExtractor:
    """Numaflow's ``eventTimeExtractor``: the payload, with the event time its expression reads."""

    def __init__(self, expression: str, format: str | None = None) -> None:
        self.expression, self.format = expression, format
        self._extract = _Extract(expression, format)

    def __getstate__(self) -> dict[str, Any]:
        return {"expression": self.expression, "format": self.format}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["expression"], state["format"])  # type: ignore[misc]

    def __call__(self, payload: bytes) -> Stamped:
        return Stamped(payload, self._extract(payload))


class TimeExtractionFilter:
    """Numaflow's ``timeExtractionFilter``: dropped unless ``filterExpr`` is true, then stamped."""

    def __init__(self, filter_expr: str, event_time_expr: str, event_time_format: str | None = None) -> None:
        self.texts = (filter_expr, event_time_expr, event_time_format)
        self._keep: FilterExpression = compile_filter(filter_expr)
        self._extract = _Extract(event_time_expr, event_time_format)

    def __getstate__(self) -> dict[str, Any]:
        return {"texts": self.texts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(*state["texts"])  # type: ignore[misc]

    def __call__(self, payload: bytes) -> Stamped:
        if not self._keep(payload):  # false, or failed: Numaflow drops it (MessageToDrop)
            return Stamped(b"", tags=(DROP,))
        return Stamped(payload, self._extract(payload))


class BuiltinSpec(Model):
    """``udf.builtin``: one of Numaflow's builtins (:data:`BUILTINS`) and its ``kwargs``."""

    name: str = Field(pattern="^(" + "|".join(BUILTINS) + ")$")
    kwargs: dict[str, str] = Field(default_factory=dict)
    args: list[str] = Field(default_factory=list)  # Numaflow's builtins never read them

    @model_validator(mode="after")
    def _kwargs(self) -> BuiltinSpec:
        required, optional = BUILTINS[self.name]
        for key in required:
            if key not in self.kwargs:
                raise ValueError(f'the {self.name} builtin needs kwargs.{key}, e.g. "{_EXAMPLES[key]}"')
        for key, text in self.kwargs.items():
            if key not in required + optional:
                known = ", ".join(required + optional) or "none"
                raise ValueError(f"kwargs.{key}: the {self.name} builtin does not read it (it reads {known})")
            try:
                if key in _FORMATS:
                    if text:  # an empty format is none: dateparse, as Numaflow's `format != ""`
                        check_layout(text)
                else:
                    compile_filter(text)
            except ValueError as exc:
                raise ValueError(f"kwargs.{key}: {exc}") from None
        return self

    @property
    def kind(self) -> str:
        """How the step runs: ``filter`` (a mask) or ``map`` (one output per message)."""
        return "filter" if self.name == "filter" else "map"

    def function(self) -> Callable[[bytes], Any]:
        k = self.kwargs
        if self.name == "filter":
            return compile_filter(k["expression"])
        if self.name == "eventTimeExtractor":
            return EventTimeExtractor(k["expression"], k.get("format"))
        if self.name == "timeExtractionFilter":
            return TimeExtractionFilter(k["filterExpr"], k["eventTimeExpr"], k.get("eventTimeFormat"))
        return cat
