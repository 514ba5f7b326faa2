"""Load and check a pipeline spec; every problem is a :class:`~tidal.errors.SpecError` with a path.

``load_pipeline`` reads YAML (a path or the text), ``parse_pipeline`` takes a mapping, and
both return a :class:`~tidal.spec.model.PipelineSpec` that passed every check:
- **Structure** (pydantic): types, ranges, unknown keys. A typo gets a "did you mean" from
  the valid keys at that place.
- **Scale blocks**: converted to :class:`~tidal.scaling.NumaflowScale`, whose own checks name
  the field (``vertices[2].scale.max: 1 is below min 3``).
- **The graph**: unique names; edges between known vertices; no duplicate edges; a cycle only
  through an edge with conditions (a retry loop); sources without inputs and sinks without
  outputs; every UDF and sink fed by an edge; every source and UDF drained by one; every vertex
  reachable from a source.
- **Code references**: every ``module:function`` and ``module:Class`` imports and has the
  right type.
- **Policies**: a ``policy: kpa`` vertex's ``kpa`` block makes a valid
  :class:`~tidal.scaling.KpaSpec` (:func:`kpa_spec`).

All problems found in one pass are reported together, the first as the error's ``path``.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from tidal import errors
from tidal.scaling.limits import BufferLimits
from tidal.spec import chains, manifest
from tidal.spec.graph_checks import check_graph, condition_problems
from tidal.spec.kpa import kpa_spec
from tidal.spec.model import PipelineSpec, UserClassSpec, VertexSpec
from tidal.spec.mono import as_pipeline, check_mono, is_mono, mono_error
from tidal.spec.scale import numaflow_scale
from tidal.spec.sdk_kinds import check_reducer
from tidal.spec.side_input_checks import side_input_problems

log = logging.getLogger("tidal.spec")

__all__ = ["load_pipeline", "numaflow_scale", "parse_pipeline", "resolve"]


def load_pipeline(source: str | Path, handlers: Mapping[str, str] | None = None) -> PipelineSpec:
    """Read a pipeline from a YAML file (a ``Path``, or a ``str`` naming a file) or YAML text: a
    Tidal spec, or a Numaflow manifest (:mod:`tidal.spec.manifest`; ``handlers`` maps its
    containers, by vertex name or image, to pynumaflow handlers)."""
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and source.endswith((".yaml", ".yml"))
    ):
        path = Path(source)
        try:
            text = path.read_text()
        except OSError as exc:
            raise errors.SpecError(
                str(path), f"cannot read the pipeline file: {exc.strerror}", "check the path"
            ) from None
        except UnicodeDecodeError as exc:
            raise errors.SpecError(
                str(path),
                f"is not a text file (byte {exc.start} is not UTF-8)",
                "give the pipeline's YAML file",
            ) from None
    else:
        text = source
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        problem = getattr(exc, "problem", None) or str(exc)
        raise errors.SpecError(
            where, f"not valid YAML: {problem}", "fix the indentation or quoting there"
        ) from None
    if not isinstance(data, Mapping):
        raise errors.SpecError(
            "", "a pipeline is a mapping with name, vertices and edges", "see docs/pipeline-spec.md"
        )
    if manifest.is_manifest(data):
        converted = manifest.convert(data, handlers)
        if converted.ignored:
            log.warning("%s", converted.warning())
        data = converted.data
    return parse_pipeline(data)


def parse_pipeline(data: Mapping[str, Any] | PipelineSpec) -> PipelineSpec:
    """Validate a mapping (or re-check a model built in Python) and return the pipeline."""
    if isinstance(data, PipelineSpec):
        return _checked(data)
    if not is_mono(data):
        return _checked({k: v for k, v in data.items() if k != "kind"})
    try:
        return _checked(as_pipeline(data))
    except errors.SpecError as exc:
        raise mono_error(exc, data) from None


def _checked(data: Mapping[str, Any] | PipelineSpec) -> PipelineSpec:
    if isinstance(data, PipelineSpec):
        spec = data
    else:
        try:
            spec = PipelineSpec.model_validate(dict(data))
        except ValidationError as exc:
            raise _collect([_from_pydantic(e) for e in exc.errors()]) from None
    problems = [
        *check_graph(spec),
        *_check_vertices(spec),
        *(errors.SpecError(*p) for p in condition_problems(spec)),
        *side_input_problems(spec),
    ]
    if not problems:  # the chains of a graph that holds together
        problems = [
            errors.SpecError(
                f"edges[{k}].chain",
                f"{spec.edges[k].from_} → {spec.edges[k].to} cannot be chained: {why}",
                "remove chain: true (the edge keeps its buffer)",
            )
            for k, why in chains.chain_errors(spec)
        ]
    if problems:
        raise _collect(problems)
    return spec


def _collect(problems: list[errors.SpecError]) -> errors.SpecError:
    first = problems[0]
    return errors.SpecError(first.path, first.problem, first.fix, problems[1:])


# -- pydantic errors → SpecError ---------------------------------------------------------------


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _from_pydantic(err: Mapping[str, Any]) -> errors.SpecError:
    loc = tuple(err["loc"])
    kind = err["type"]
    message = str(err["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        key = str(loc[-1])
        valid = _keys_at(loc[:-1])
        close = difflib.get_close_matches(key, valid, n=1)
        fix = f"did you mean {close[0]!r}?" if close else f"valid keys here: {', '.join(sorted(valid))}"
        return errors.SpecError(_path(loc), f"unknown key {key!r}", fix)
    if kind == "missing":
        return errors.SpecError(_path(loc), "is required", "add it")
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, errors.SpecError):  # a validator of the scaling core: its path is the leaf's
        leaf = cause.path.rsplit(".", 1)[-1]
        return errors.SpecError(f"{_path(loc)}.{leaf}" if loc else cause.path, cause.problem, cause.fix)
    value = err.get("input")
    shown = f"{value!r} " if value is not None and not isinstance(value, Mapping | list) else ""
    return errors.SpecError(_path(loc), f"{shown}{message}".strip(), "")


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model at ``loc`` accepts, as written in YAML."""
    model: Any = PipelineSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = _field_by_alias(model, str(part))
        if field is None:
            return []
        model = _model_of(field.annotation)
        if model is None:
            return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _field_by_alias(model: type[BaseModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field
    return None


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) in (typing.Union, list):
        for arg in typing.get_args(annotation):
            found = _model_of(arg)
            if found is not None:
                return found
    return None


# -- per vertex: scale and code references -----------------------------------------------------


def _check_vertices(spec: PipelineSpec) -> list[errors.SpecError]:
    problems: list[errors.SpecError] = []
    for i, v in enumerate(spec.vertices):
        at = f"vertices[{i}]"
        if not v.mono and v.scale.min is not None and v.scale.min < 0:
            problems.append(
                errors.SpecError(
                    f"{at}.scale.min",
                    f"{v.scale.min} is negative",
                    "use 0 or more (Numaflow's pipeline validator refuses it; a MonoVertex reads it as 0)",
                )
            )
            continue
        try:
            numaflow_scale(v.scale, at)
        except errors.SpecError as exc:
            problems.append(exc)
        if v.limits is not None and v.limits.over():
            limits = spec.limits_of(v.name)
            try:
                BufferLimits(limits.buffer_max_length, limits.buffer_usage_limit)
            except errors.SpecError as exc:
                problems.append(errors.SpecError(f"{at}.{exc.path}", exc.problem, exc.fix))
        if v.udf is not None and v.udf.engine == "python":
            ref = v.udf.function
            if isinstance(ref, str):
                try:
                    resolve(ref, f"{at}.udf.{v.udf.kind.value}", kind="function")
                except errors.SpecError as exc:
                    problems.append(exc)
        elif v.udf is not None and v.udf.reduce is not None:
            try:  # a Reducer class is callable too
                handler = resolve(v.udf.reduce, f"{at}.udf.reduce")
                check_reducer(handler, v.udf.group_by, f"{at}.udf", v.udf.reduce_args)
            except errors.SpecError as exc:
                problems.append(exc)
        elif v.udf is not None:
            problems.extend(_check_frame_step(spec, v, at))
        if v.mono:
            problems.extend(check_mono(v, at))
        if v.source is not None and v.source.http is not None and spec.policy_of(v.name) != "kpa":
            problems.append(
                errors.SpecError(
                    f"{at}.policy",
                    f"{spec.policy_of(v.name)} cannot scale an HTTP source: its pending is unknown (requests "
                    "wait in clients, not in a buffer)",
                    "use policy: kpa (the default for an HTTP source), which scales on measured concurrency",
                )
            )
        elif spec.policy_of(v.name) == "kpa":
            try:
                kpa_spec(v, at)
            except errors.SpecError as exc:
                problems.append(exc)
        elif v.kpa:
            problems.append(
                errors.SpecError(
                    f"{at}.kpa", "is read only with policy: kpa", "set policy: kpa, or remove kpa"
                )
            )
        for path, user in _user_classes(v, at):
            if isinstance(user.class_, str):
                try:
                    resolve(user.class_, path, kind="class")
                except errors.SpecError as exc:
                    problems.append(exc)
        if v.source is not None and isinstance(v.source.pynumaflow, str):
            try:
                resolve(v.source.pynumaflow, f"{at}.source.pynumaflow", kind="class")
            except errors.SpecError as exc:
                problems.append(exc)
        if v.sink is not None and isinstance(v.sink.pynumaflow, str):
            try:
                resolve(v.sink.pynumaflow, f"{at}.sink.pynumaflow")  # a Sinker class is callable too
            except errors.SpecError as exc:
                problems.append(exc)
    return problems


def _check_frame_step(spec: PipelineSpec, v: VertexSpec, at: str) -> list[errors.SpecError]:
    """A SQL or DataFrame step: its input declares one schema; its function takes one DataFrame.
    (The SQL and the schema are checked by Spark when the run starts: :mod:`tidal.spark.query.frames`.)"""
    assert v.udf is not None
    problems: list[errors.SpecError] = []
    declared = spec.input_records(v.name)
    if not declared or any(r is None for r in declared):
        problems.append(
            errors.SpecError(
                f"{at}.udf.{v.udf.engine}",
                "reads records without a schema (a SQL or DataFrame step sees columns, not bytes)",
                'declare records: {format: json, schema: "name TYPE, ..."} on the edge into it, '
                "or on the pipeline for every edge",
            )
        )
    elif len({r.schema_ for r in declared if r is not None}) > 1:
        problems.append(
            errors.SpecError(
                f"{at}.udf.{v.udf.engine}",
                "reads edges with different schemas",
                "give every edge into it the same records.schema",
            )
        )
    if v.udf.dataframe is not None:
        try:
            fn = resolve(v.udf.dataframe, f"{at}.udf.dataframe", kind="function")
            _check_one_argument(fn, f"{at}.udf.dataframe")
        except errors.SpecError as exc:
            problems.append(exc)
    return problems


def _check_one_argument(fn: Callable[..., Any], path: str) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or C function: nothing to check before it runs
    try:
        signature.bind(object())
    except TypeError:
        raise errors.SpecError(
            path,
            f"{getattr(fn, '__name__', fn)}{signature} cannot be called with one DataFrame",
            "define it as def step(df: DataFrame) -> DataFrame",
        ) from None


def _user_classes(v: VertexSpec, at: str) -> list[tuple[str, UserClassSpec]]:
    found = []
    if v.source is not None and v.source.user is not None:
        found.append((f"{at}.source.user.class", v.source.user))
    if v.sink is not None and v.sink.user is not None:
        found.append((f"{at}.sink.user.class", v.sink.user))
    if v.udf is not None and v.udf.dead_letter is not None and v.udf.dead_letter.user is not None:
        found.append((f"{at}.udf.deadLetter.user.class", v.udf.dead_letter.user))
    return found


def resolve(ref: str | Callable[..., Any] | type, path: str, kind: str = "function") -> Any:
    """Import ``module:name`` (a callable or class given directly is returned as it is)."""
    if not isinstance(ref, str):
        return ref
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise errors.SpecError(path, f"{ref!r} is not module:{kind}", f"write it as my_module:my_{kind}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] == "pynumaflow":
            raise errors.SpecError(
                path,
                f"{module_name!r} needs Numaflow's Python SDK, which is not installed",
                "pip install 'tidal[numaflow]' (pynumaflow)",
            ) from None
        raise errors.SpecError(
            path,
            f"cannot import {module_name!r} (ModuleNotFoundError: {exc})",
            "check the module is on PYTHONPATH (e.g. next to the pipeline file) and imports cleanly",
        ) from None
    except Exception as exc:  # any import-time failure is the user's to see
        raise errors.SpecError(
            path,
            f"cannot import {module_name!r} ({type(exc).__name__}: {exc})",
            "check the module is on PYTHONPATH (e.g. next to the pipeline file) and imports cleanly",
        ) from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            public = [n for n in dir(module) if not n.startswith("_")]
            close = difflib.get_close_matches(part, public, n=1)
            fix = f"did you mean {module_name}:{close[0]}?" if close else f"define {attr} in {module_name}"
            raise errors.SpecError(path, f"module {module_name!r} has no {attr!r}", fix)
        target = getattr(target, part)
    if kind == "class" and not isinstance(target, type):
        raise errors.SpecError(
            path, f"{ref!r} is not a class", "point at the class, not an instance or function"
        )
    if kind == "function" and not callable(target):
        raise errors.SpecError(path, f"{ref!r} is not callable", "point at a function")
    return target
