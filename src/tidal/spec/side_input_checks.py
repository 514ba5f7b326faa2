"""The cross-field checks of side inputs (:mod:`tidal.spec.side_inputs`), each naming the field
and the fix: a vertex naming a side input that is not defined, a name given twice, a schedule or a
timezone Tidal cannot read, a side input no vertex reads, a vertex whose handler cannot read one."""

from __future__ import annotations

from tidal import errors
from tidal.spec.model import PipelineSpec, VertexSpec
from tidal.spec.side_inputs import trigger_of

__all__ = ["side_input_problems"]


def side_input_problems(spec: PipelineSpec) -> list[errors.SpecError]:
    """What is wrong with the pipeline's side inputs and the vertices that name them."""
    problems: list[errors.SpecError] = []
    defined: dict[str, int] = {}
    for k, side in enumerate(spec.side_inputs):
        at = f"sideInputs[{k}]"
        if side.name in defined:
            problems.append(
                errors.SpecError(f"{at}.name", f"{side.name!r} is defined more than once", "rename one")
            )
        defined.setdefault(side.name, k)
        try:
            trigger_of(side, at)
        except errors.SpecError as exc:
            problems.append(exc)
    used: set[str] = set()
    for i, v in enumerate(spec.vertices):
        at = f"vertices[{i}].sideInputs"
        for j, name in enumerate(v.side_inputs):
            if name not in defined:
                known = ", ".join(defined) or "none is defined"
                problems.append(
                    errors.SpecError(
                        f"{at}[{j}]",
                        f"side input {name!r} is not defined",
                        f"define it under the pipeline's sideInputs (defined: {known})",
                    )
                )
            if v.side_inputs.index(name) != j:
                problems.append(errors.SpecError(f"{at}[{j}]", f"{name!r} is named twice", "name it once"))
            used.add(name)
        if v.side_inputs and not _reads_files(v):
            problems.append(
                errors.SpecError(
                    at,
                    f"a {v.kind} vertex cannot read side inputs on Tidal",
                    "name side inputs on a vertex whose udf is pynumaflow (a map handler) or a "
                    "reduce, or whose sink is pynumaflow; remove sideInputs here",
                )
            )
    for name, k in defined.items():
        if name not in used:
            problems.append(
                errors.SpecError(
                    f"sideInputs[{k}]",
                    f"side input {name!r} is read by no vertex",
                    "name it in a vertex's sideInputs, or remove it (its retriever would run for nothing)",
                )
            )
    return problems


def _reads_files(v: VertexSpec) -> bool:
    """A vertex whose handler Tidal hands its side inputs as files before it runs: a pynumaflow
    map handler or sink (in the task whose partition carried the values), or a reduce vertex's
    handler (after the shuffle, from the buffer backend: tidal.spark.batch.side_input_relay).
    Not a source: its reader reads before any value could be placed, and Numaflow's sources are
    user servers Tidal does not run as handlers; not SQL, DataFrame or plain Python steps, which
    have no SIDE_INPUT_DIR_PATH to read."""
    if v.source is not None:
        return False
    if v.udf is not None:
        return v.udf.pynumaflow is not None or v.udf.reduce is not None
    return v.sink is not None and v.sink.pynumaflow is not None
