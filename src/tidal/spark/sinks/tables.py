"""Table sinks: Parquet files with a commit log, and Delta Lake tables (delta-rs, no JVM jars).

Both turn messages into rows: with ``format: json`` every payload must be a JSON object, whose
fields become columns beside ``id``; with ``format: bytes`` the columns are ``id`` and
``payload``. A payload that is not a JSON object stops the vertex with a :class:`SinkError`
naming the message id (nothing of the batch is committed): validate upstream, in a UDF with a
``deadLetter``, to route such messages aside.

**Parquet, exactly once.** Each task writes its rows to a temporary file under
``PATH/_tidal_tmp/`` and returns its name. The commit, in the driver, first removes any file of
this batch left by an attempt that crashed mid-commit, renames the temporary files to
``[field=value/]part-<run>-<vertex>-<role>-<batch>-<n>.parquet``, then writes the batch's entry
in the commit log ``PATH/_tidal_log/<run>-<vertex>-<role>/<batch>.json`` (the files it
committed). A replay of a logged batch only removes its temporary files. Readers that must see
committed files only list them with :func:`committed_files` (pyarrow, DuckDB and Spark take a
list of files); a plain directory scan could also see the files of a batch whose commit crashed
between the renames and the log, until its replay. Directories starting with ``_`` are skipped
by pyarrow's and Spark's dataset readers.

**Delta, exactly once.** Each task returns its rows as Arrow IPC bytes; the commit writes them in
one Delta transaction carrying an application transaction ``(tidal-<run>-<vertex>-<role>,
batch)``: before writing, the table's recorded version for that application id is read, and a
batch at or below it is skipped — Delta's own idempotent-write mechanism, so a replay after a
crash writes nothing twice. The schema comes from the first batch (or the existing table); a
later batch with new fields is merged into the schema (``schema_mode="merge"``).

Part of a batch passes through the driver's memory (Delta) or its file names do (Parquet); a
micro-batch is at most replicas × ``readBatchSize`` messages.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tidal.errors import SinkError
from tidal.isb.durability import replace_durably, sync_dir, sync_paths
from tidal.spark.sinks.connector import Sink, SinkPlace
from tidal.spark.sinks.delta_log import repair_delta_tail, sync_delta_version
from tidal.spec.model import SinkSpec, TableSinkSpec

__all__ = ["DeltaSink", "ParquetSink", "SinkError", "committed_files", "delta", "parquet", "rows"]

TMP = "_tidal_tmp"
LOG = "_tidal_log"


def _pylist(values: Any) -> list[Any]:
    return values.to_pylist() if hasattr(values, "to_pylist") else list(values)


def rows(ids: Any, payloads: Any, fmt: str, errors: Sequence[str] = ()) -> Any:
    """The messages as an Arrow table: ``id`` and the JSON objects' fields, or ``id, payload``;
    with ``errors`` (a dead letter), an ``error`` column."""
    table = _rows(ids, payloads, fmt)
    if errors:
        import pyarrow as pa

        table = table.append_column("error", pa.array(list(errors), pa.string()))
    return table


def _rows(ids: Any, payloads: Any, fmt: str) -> Any:
    import pyarrow as pa

    if fmt == "bytes":
        return pa.table(
            {"id": pa.array(_pylist(ids), pa.string()), "payload": pa.array(_pylist(payloads), pa.binary())}
        )
    records = []
    for message_id, payload in zip(_pylist(ids), _pylist(payloads), strict=True):
        try:
            record = json.loads(payload)
        except ValueError as exc:
            raise SinkError(
                f"message {message_id}: payload is not JSON ({exc}); use format: bytes, or route such "
                "messages to a deadLetter in a UDF upstream"
            ) from None
        if not isinstance(record, dict):
            raise SinkError(
                f"message {message_id}: payload is JSON but not an object: format: json needs objects"
            )
        records.append({"id": message_id, **{k: v for k, v in record.items() if k != "id"}})
    return pa.Table.from_pylist(records)


def _split_by(table: Any, columns: list[str]) -> list[tuple[str, Any]]:
    """(``a=1/b=x`` subdirectory, rows) per distinct partition value."""
    import pyarrow.compute as pc

    if not columns:
        return [("", table)]
    for column in columns:
        if column not in table.column_names:
            raise SinkError(
                f"partitionBy field {column!r} is missing from the payloads: add it or fix partitionBy"
            )
    keys = table.select(columns).to_pylist()
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(tuple(key[c] for c in columns), []).append(i)
    out = []
    for values, indexes in groups.items():
        sub = "/".join(f"{c}={v}" for c, v in zip(columns, values, strict=True))
        out.append((sub, table.take(pc.cast(indexes, "int64")).drop_columns(columns)))
    return out


class ParquetSink:
    """``run()`` names this run (and vertex, and role); called in the driver's commit only."""

    def __init__(self, path: str | Path, fmt: str, partition_by: list[str], run: Callable[[], str]) -> None:
        self.path = Path(path)
        self.fmt = fmt
        self.partition_by = partition_by
        self.run = run

    def write(self, ids: Any, payloads: Any, errors: Sequence[str] = ()) -> list[tuple[str, str]] | None:
        """In a task: the rows to temporary Parquet files; returns ``(subdirectory, file)`` pairs."""
        import pyarrow.parquet as pq

        if len(ids) == 0:
            return None
        table = rows(ids, payloads, self.fmt, errors)
        tmp = self.path / TMP
        tmp.mkdir(parents=True, exist_ok=True)
        out = []
        for sub, part in _split_by(table, self.partition_by):
            name = tmp / f"{uuid.uuid4().hex}.parquet"
            pq.write_table(part, name)
            out.append((sub, str(name)))
        sync_paths([Path(name) for _, name in out])  # in the task, in parallel: the commit renames
        return out

    def discard(self, parts: Sequence[Any]) -> None:
        """Remove the temporary files of parts that will not be committed (a routed replay)."""
        for part in parts:
            for _, tmp in part or ():
                with contextlib.suppress(FileNotFoundError):
                    Path(tmp).unlink()

    def commit(self, batch_id: int, parts: Sequence[Any]) -> None:
        files = [pair for part in parts if part for pair in part]
        run = self.run()
        log_dir = self.path / LOG / run
        entry = log_dir / f"{batch_id:012d}.json"
        if entry.exists():  # a replay of a committed batch
            for _, tmp in files:
                with contextlib.suppress(FileNotFoundError):
                    Path(tmp).unlink()
            return
        prefix = f"part-{run}-{batch_id:012d}-"
        for stale in self.path.rglob(f"{prefix}*.parquet"):  # an attempt that crashed mid-commit
            stale.unlink()
        committed = []
        for n, (sub, tmp) in enumerate(sorted(files)):
            target = self.path / sub / f"{prefix}{n:05d}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
            committed.append(str(target.relative_to(self.path)))
        for folder in {(self.path / c).parent for c in committed}:  # the names, before the log
            sync_dir(folder)
        if not log_dir.is_dir():
            log_dir.mkdir(parents=True, exist_ok=True)
            sync_dir(log_dir.parent)
        partial = entry.with_suffix(".tmp")
        with partial.open("w") as f:
            json.dump({"batch": batch_id, "files": committed}, f)
            f.flush()
            os.fsync(f.fileno())
        replace_durably(partial, entry, "sync")


def committed_files(path: str | Path) -> list[Path]:
    """Every Parquet file the commit log of the table at ``path`` lists, in commit order."""
    root = Path(path)
    out: list[Path] = []
    for entry in sorted((root / LOG).glob("*/*.json"), key=lambda p: (p.stat().st_mtime, p.name)):
        out.extend(root / f for f in json.loads(entry.read_text())["files"])
    return out


class DeltaSink:
    """``run()`` names this run (and vertex, and role): the application id is ``tidal-<run()>``."""

    def __init__(self, path: str | Path, fmt: str, partition_by: list[str], run: Callable[[], str]) -> None:
        self.path = str(path)
        self.fmt = fmt
        self.partition_by = partition_by
        self.run = run

    @property
    def app_id(self) -> str:
        return f"tidal-{self.run()}"

    def write(self, ids: Any, payloads: Any, errors: Sequence[str] = ()) -> bytes | None:
        """In a task: the rows as Arrow IPC bytes for the commit."""
        import pyarrow as pa

        if len(ids) == 0:
            return None
        table = rows(ids, payloads, self.fmt, errors)
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue()

    def committed_version(self) -> int | None:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            return DeltaTable(self.path).transaction_version(self.app_id)
        except TableNotFoundError:
            return None

    def commit(self, batch_id: int, parts: Sequence[Any]) -> None:
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake

        chunks = [p for p in parts if p]
        if not chunks:
            return
        done = self.committed_version()
        if done is not None and done >= batch_id:
            return  # this batch is in the table already (a replay)
        tables = [pa.ipc.open_stream(chunk).read_all() for chunk in chunks]
        table = pa.concat_tables(tables, promote_options="default")
        write_deltalake(
            self.path,
            table,
            mode="append",
            partition_by=self.partition_by or None,
            schema_mode="merge",
            commit_properties=CommitProperties(
                app_transactions=[Transaction(app_id=self.app_id, version=batch_id)]
            ),
        )
        sync_delta_version(Path(self.path))


def _run_name(place: SinkPlace) -> Callable[[], str]:
    """The name of the run's writes to the table, read in the driver's commit only: a task needs
    nothing from the run directory."""

    def run() -> str:
        from tidal.spark.batch import rundir

        return f"{rundir.run_id(place.run_dir)}-{place.vertex}-{place.role}"

    return run


def parquet(spec: SinkSpec, place: SinkPlace) -> Sink:
    table: TableSinkSpec | None = spec.parquet
    assert table is not None
    return ParquetSink(place.path(table.path), table.format, table.partition_by, _run_name(place))


def delta(spec: SinkSpec, place: SinkPlace) -> Sink:
    table: TableSinkSpec | None = spec.delta
    assert table is not None
    return DeltaSink(place.path(table.path), table.format, table.partition_by, _run_name(place))


def repair_delta(spec: SinkSpec, place: SinkPlace) -> list[str]:
    """At a run's start: the table's unsynced tail a power cut left, removed
    (:mod:`tidal.spark.sinks.delta_log`)."""
    table: TableSinkSpec | None = spec.delta
    assert table is not None
    return repair_delta_tail(place.path(table.path))
