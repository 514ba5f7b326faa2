"""A run directory belongs to one pipeline: its identity is recorded, and a mismatch is refused.

Starting again on a run directory resumes it (checkpoints, buffers, sink positions). That is
only right for the same pipeline: another pipeline would continue the old generator's count,
append to the old outputs and read buffers it did not write. So the first start records the
pipeline's **identity** in ``identity.json`` — its name and a hash of what determines its data
(vertices with their sources, UDFs and sinks, edges, buffer backend and limits) — and every
later start compares. Scaling fields (``scale:``, ``replicas``, ``policy``, ``controller``)
are not part of it: changing how a pipeline scales and resuming it is what a user does.

:func:`claim` refuses a mismatch with :class:`~tidal.errors.RunDirectoryError`, which names
both pipelines and the two ways out: a new ``--run-dir``, or ``--reset`` (:func:`reset`), which
deletes the directory's state and starts over.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from tidal import errors
from tidal.isb.durability import sync_dir, write_durably
from tidal.spec import PipelineSpec
from tidal.spec.chains import plan_chains

__all__ = ["IDENTITY_FILE", "adopt", "claim", "identity", "reset", "run_id"]

IDENTITY_FILE = "identity.json"
_SCALING_ONLY = {"scale", "replicas", "policy"}


def _plain(value: Any) -> Any:
    """JSON for the hash: callables given in the builder count by their qualified name."""
    if callable(value) and not isinstance(value, type):
        return f"{getattr(value, '__module__', '?')}:{getattr(value, '__qualname__', repr(value))}"
    if isinstance(value, type):
        return f"{value.__module__}:{value.__qualname__}"
    return repr(value)


def identity(spec: PipelineSpec) -> dict[str, str]:
    """The pipeline's name, the hash of what determines its data, and its chains.

    The chains (:mod:`tidal.spec.chains`) are recorded apart from the hash: a run's state is
    laid out by them (a chain's one checkpoint and batch ids, no buffer inside it), so a restart
    with other chains is refused with its own reason; a directory from before chaining ran
    every vertex on its own (no chains)."""
    data = spec.model_dump(by_alias=True, exclude={"controller"})
    for vertex in data["vertices"]:
        for key in _SCALING_ONLY:
            vertex.pop(key, None)
    for edge in data["edges"]:
        edge.pop("chain", None)
    _side_inputs(data)
    text = json.dumps(data, sort_keys=True, default=_plain)
    return {
        "pipeline": spec.name,
        "data_hash": hashlib.sha256(text.encode()).hexdigest()[:16],
        "chains": plan_chains(spec).signature,
    }


def _side_inputs(data: dict[str, Any]) -> None:
    """Side inputs count by their retrievers and readers, not their triggers (when a value is
    retrieved is a schedule, as scaling is); none leaves the hash as it was before side inputs
    existed, so a run directory from then still resumes."""
    for side in data.get("sideInputs") or []:
        side.pop("trigger", None)
    if not data.get("sideInputs"):
        data.pop("sideInputs", None)
    for vertex in data["vertices"]:
        if not vertex.get("sideInputs"):
            vertex.pop("sideInputs", None)


def _chains_text(signature: str) -> str:
    return signature.replace(">", " → ").replace(";", ", ") if signature else "no chains"


def claim(run_dir: str | Path, spec: PipelineSpec) -> bool:
    """Make ``run_dir`` this pipeline's: record its identity if the directory is new (returns
    False), or check it if the directory holds a run (returns True: it resumes)."""
    run_dir = Path(run_dir)
    mine = identity(spec)
    recorded_file = run_dir / IDENTITY_FILE
    holds_a_run = (run_dir / "pipeline.db").exists() or (run_dir / "checkpoints").exists()
    if recorded_file.exists():
        try:
            recorded = json.loads(recorded_file.read_text())
        except ValueError:
            raise errors.RunDirectoryError(
                str(run_dir),
                f"its identity ({recorded_file.name}) is damaged: empty or cut short, as a power cut"
                " can leave a file that was written without a sync",
                "restore the run directory from a copy, or --reset to delete its state and start over",
            ) from None
        recorded.setdefault("chains", "")  # recorded before chaining: every vertex on its own
        data = [k for k in mine if k != "chains"]
        same_data = all(recorded.get(k) == mine[k] for k in data)
        if same_data and recorded["chains"] != mine["chains"]:
            raise errors.RunDirectoryError(
                str(run_dir),
                f"ran with {_chains_text(recorded['chains'])}; the spec now has "
                f"{_chains_text(mine['chains'])} (a run's checkpoints and buffers follow its chains)",
                "set chain: on the edges as this run had them, or use a new --run-dir, or --reset",
            )
        if {k: recorded.get(k) for k in mine} != mine:
            same_name = recorded.get("pipeline") == mine["pipeline"]
            what = (
                f"holds a run of {recorded.get('pipeline')!r} whose data differs "
                f"(hash {recorded.get('data_hash')} there, {mine['data_hash']} now)"
                if same_name
                else f"holds a run of pipeline {recorded.get('pipeline')!r}, not {mine['pipeline']!r}"
            )
            raise errors.RunDirectoryError(
                str(run_dir),
                what,
                "use a new --run-dir, or --reset to delete this directory's state and start over",
            )
        return True
    mine["run_id"] = uuid.uuid4().hex[:12]
    if holds_a_run:  # a run from before identities were recorded: claim it as it is
        write_durably(recorded_file, json.dumps(mine))
        return True
    run_dir.mkdir(parents=True, exist_ok=True)
    sync_dir(run_dir.parent)  # the run directory's own name
    write_durably(recorded_file, json.dumps(mine))
    return False


def adopt(run_dir: str | Path, spec: PipelineSpec) -> None:
    """Record ``spec`` as the run directory's pipeline after a drained restart that changed what
    its steps compute (``tidal apply --restart``; :func:`tidal.spec.edits.restart_refused` has
    checked the layout is the same): the run keeps its id, so its sinks keep their batch
    identities, and its queries continue from their checkpoints."""
    path = Path(run_dir) / IDENTITY_FILE
    recorded = json.loads(path.read_text())
    mine = identity(spec)
    if recorded.get("chains", "") != mine["chains"] or recorded.get("pipeline") != mine["pipeline"]:
        raise errors.RunDirectoryError(str(run_dir), "a restart cannot change the pipeline or its chains", "")
    recorded["data_hash"] = mine["data_hash"]
    write_durably(path, json.dumps(recorded))


def run_id(run_dir: str | Path) -> str:
    """This run's id (made when the directory was claimed; a ``--reset`` makes a new one): the
    table sinks name their files and transactions by it, so a new run's batch 0 is not taken for
    a replay of an old run's."""
    path = Path(run_dir) / IDENTITY_FILE
    try:
        recorded = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        recorded = {}
    if "run_id" not in recorded:  # a run directory from before run ids
        recorded["run_id"] = hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:12]
        write_durably(path, json.dumps(recorded))
    return str(recorded["run_id"])


def reset(run_dir: str | Path) -> None:
    """Delete everything in ``run_dir`` (state, checkpoints, outputs written there); refused while
    a live run holds it (:mod:`tidal.spark.batch.driver_lock`)."""
    from tidal.spark.batch.driver_lock import DriverLock

    run_dir = Path(run_dir)
    if run_dir.exists():
        DriverLock(run_dir).acquire().release()  # raises, naming the live run
        shutil.rmtree(run_dir)
