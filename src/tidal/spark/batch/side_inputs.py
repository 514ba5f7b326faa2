"""Side-input values on their way: kept in the run directory, carried by each micro-batch's
partitions, and written where a pynumaflow handler reads them on the host that runs its task.

**Kept.** The driver's manager (:mod:`tidal.spark.run.side_inputs`) writes each new value to
``<run dir>/side-inputs/<name>.json`` (its bytes, version and time), whole or not at all and
synced before it returns: a restart starts from it, and the queries' readers, which plan the
micro-batches in Python processes of their own on the driver's host, read it there.

**Carried.** A reader adds the current values of the side inputs its query's vertices name to
every partition of the batch it plans (:class:`Carried`, a field of
:class:`~tidal.spark.batch.admission.Range`). Spark sends partitions to the executors with the
tasks, so a value reaches every host with the first batch planned after it was written: no
shared disk, no restart of the query. Side inputs are small (configuration, a model's
parameters), and a partition is pickled once per task.

**Written where the handler reads.** The task's reader writes each carried value to
``<host dir>/<name>`` (:func:`host_dir`, one per run and host, under the system's temporary
directory: ``/var/numaflow`` is seldom writable) before it hands Spark the task's row; the writer
task, which runs the handler, reads rows only after that, in the same task. A file is replaced by
an atomic rename and only by a newer version, so a task planned before a change never puts the
old value back. :func:`point_pynumaflow` makes ``pynumaflow.sideinput.SIDE_INPUT_DIR_PATH`` that
directory in the writer's process, so a Numaflow handler reads the file as it does on Numaflow.

**Not for a reduce vertex.** Its handler runs after Spark's shuffle, maybe on a host none of the
batch's partitions went to; its task fetches the values from the buffer backend instead
(:mod:`tidal.spark.batch.side_input_relay`), and its reader carries none.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidal.isb.durability import write_durably
from tidal.scaling.side_inputs import SideInputValue

if TYPE_CHECKING:
    from tidal.spark.batch.config import QueryConfig

__all__ = [
    "Carried",
    "SideInputStore",
    "arrive",
    "carried",
    "carry",
    "host_dir",
    "materialise",
    "point_pynumaflow",
    "require",
]

STORE_DIR = "side-inputs"
_HOST_ROOT = "tidal-side-inputs"


@dataclass(frozen=True)
class Carried:
    """The side-input values a partition carries to its task: ``(name, version, value)`` each,
    and the run's host-directory name (:func:`host_key`)."""

    key: str
    values: tuple[tuple[str, int, bytes], ...]


class SideInputStore:
    """``<run dir>/side-inputs``: each side input's current value, one file each."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / STORE_DIR
        self._cache: dict[str, tuple[tuple[int, int, int], SideInputValue]] = {}

    def write(self, name: str, value: SideInputValue) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        record = {"version": value.version, "at": value.at, "value": base64.b64encode(value.value).decode()}
        write_durably(self.path / f"{name}.json", json.dumps(record))

    def read(self, name: str) -> SideInputValue | None:
        """The current value of ``name`` (None before the first); read again only when the
        file changed (a reader asks at every trigger)."""
        path = self.path / f"{name}.json"
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._cache.get(name)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        record = json.loads(path.read_text())
        value = SideInputValue(int(record["version"]), float(record["at"]), base64.b64decode(record["value"]))
        self._cache[name] = (stamp, value)
        return value

    def current(self, names: tuple[str, ...]) -> dict[str, SideInputValue] | None:
        """Every named side input's value, or None while one has none yet (its vertices wait)."""
        out: dict[str, SideInputValue] = {}
        for name in names:
            value = self.read(name)
            if value is None:
                return None
            out[name] = value
        return out


_STORES: dict[str, SideInputStore] = {}


def store(run_dir: str) -> SideInputStore:
    """The run's store, one per process (readers ask at every trigger)."""
    found = _STORES.get(run_dir)
    if found is None:
        found = _STORES[run_dir] = SideInputStore(run_dir)
    return found


def host_key(run_dir: str, run_id: str = "") -> str:
    """The name of a run's directory on every host: the same everywhere, another for each run.
    With the run's id (:func:`tidal.spark.batch.rundir.run_id`), so a run started anew at the same
    path (``--reset``, or the directory deleted) does not meet the old run's version markers,
    which would hold its values back until its versions passed the old ones."""
    name = f"{run_dir}\0{run_id}" if run_id else run_dir
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def host_dir(key: str) -> Path:
    """Where a host keeps a run's side-input files (``TIDAL_SIDE_INPUT_ROOT`` overrides the root)."""
    root = os.environ.get("TIDAL_SIDE_INPUT_ROOT") or os.path.join(tempfile.gettempdir(), _HOST_ROOT)
    return Path(root) / key


def carried(run_dir: str, names: tuple[str, ...], run_id: str = "") -> Carried | None:
    """What a batch's partitions carry: the current values of ``names`` (None when a value is
    missing: admission held the batch back, so this is a batch planned before, replayed)."""
    values = store(run_dir).current(names)
    if values is None:
        return None
    return Carried(host_key(run_dir, run_id), tuple((n, v.version, v.value) for n, v in values.items()))


def carry(config: QueryConfig, parts: Sequence[Any]) -> list[Any]:
    """A batch's partitions (dataclasses with a ``side`` field), each with the values of the side
    inputs its query's vertices read, as they are now: every reader's ``partitions`` ends here."""
    if not config.side_inputs or config.reduce:
        return list(parts)  # a reduce's handler runs after a shuffle: it fetches them (side_input_relay)
    side = carried(config.run_dir, config.side_inputs, config.run_id)
    return [replace(p, side=side) for p in parts]


def arrive(partition: Any) -> None:
    """In the task, before its row is handed to Spark: the values its partition carried, written
    on this host (every reader's ``read`` comes here)."""
    side = getattr(partition, "side", None)
    if side is not None:
        materialise(side)


_WRITTEN: dict[tuple[str, str], int] = {}  # (key, name) → the version this process last wrote


def materialise(side: Carried) -> Path:
    """Write the carried values into this host's directory for the run, each only over an older
    version (under a lock: two tasks of different queries may carry different versions)."""
    folder = host_dir(side.key)
    todo = [
        (n, ver, val)
        for n, ver, val in side.values
        # a stat each: a temporary-files cleaner may have removed a file a long run did not change
        if _WRITTEN.get((side.key, n), 0) < ver or not (folder / n).exists()
    ]
    if not todo:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name, version, value in todo:
            marker = folder / f".{name}.version"
            try:
                have = int(marker.read_text() or 0)
            except (FileNotFoundError, ValueError):
                have = 0
            if have < version or not (folder / name).exists():
                _replace(folder / name, value)
                _replace(marker, str(version).encode())
            _WRITTEN[side.key, name] = max(version, have)
    return folder


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    tmp.replace(path)


def require(run_dir: str, names: tuple[str, ...], vertex: str, run_id: str = "") -> None:
    """Refuse to run a handler without its side inputs on this host: a task whose partition
    carried none (a reader that does not call :func:`carry` and :func:`arrive`)."""
    folder = host_dir(host_key(run_dir, run_id))
    missing = [n for n in names if not (folder / n).exists()]
    if missing:
        raise RuntimeError(
            f"vertex {vertex}: side input(s) {', '.join(missing)} did not reach this task (its "
            "reader does not carry them): set chain: false on the edge into the vertex"
        )


def point_pynumaflow(run_dir: str, run_id: str = "") -> Path:
    """Make pynumaflow's side-input directory this run's on this host, in this process: what
    ``pynumaflow.sideinput.SIDE_INPUT_DIR_PATH`` (and ``pynumaflow._constants``'s) says when a
    handler reads it. Called before the handler's module is imported, so a module that copies the
    constant at import (``from pynumaflow.sideinput import SIDE_INPUT_DIR_PATH``) gets it too."""
    folder = host_dir(host_key(run_dir, run_id))
    try:
        import pynumaflow._constants as constants
        from pynumaflow import sideinput
    except ImportError:  # no pynumaflow: a Tidal handler reads host_dir itself
        return folder
    constants.SIDE_INPUT_DIR_PATH = str(folder)
    sideinput.SIDE_INPUT_DIR_PATH = str(folder)
    return folder
