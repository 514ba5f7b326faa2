"""A Delta table's log made durable, and its unsynced tail removed after a power cut.

delta-rs writes a version's data files, then its log entry ``_delta_log/<version>.json`` (a
temporary file renamed into place), and every 100 versions a checkpoint
(``<version>.checkpoint.parquet`` and ``_last_checkpoint``), syncing none of them. The Delta sink
syncs what a version wrote (:func:`sync_delta_version`) before the batch counts as delivered. A
power cut between delta-rs's write and that sync can leave the newest entry empty or cut short,
its data files short or missing, or the newest checkpoint torn, and delta-rs then refuses the whole
table ("No table metadata or protocol found in delta log", "Truncated record") — also for readers
outside Tidal.

:func:`repair_delta_tail`, at a run's start, removes exactly that unsynced tail: a newest entry
that does not parse whole, or that adds a file whose size on disk is not the one it records, is
removed with the files it added; so is a checkpoint that does not read whole, with
``_last_checkpoint``. That is exact: such a version was never synced, so its batch never counted
as delivered, and the run writes it again (its application transaction is gone with the entry). An
entry below the newest one cannot be torn this way (each version is synced before the next batch
commits); one that is, written by another writer of the same table, is refused, naming the file.

Not caught: an entry cut exactly at the end of one of its lines, without the newline after it
(a flush ends on a page boundary, so this needs a line to end there too). It parses, and what it
lost (the last lines: ``add`` actions, then the ``txn``) is not noticed.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tidal import errors
from tidal.isb.durability import sync_dir, sync_paths

__all__ = ["repair_delta_tail", "sync_delta_version"]

LOG = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"


def sync_delta_version(path: Path) -> None:
    """Sync what the table's newest version wrote: its data files, their folders, its log entry,
    a checkpoint written at that version (and ``_last_checkpoint``), and the log's folder. The
    version's entry lists its files (``add`` actions), so nothing else of the table is touched."""
    from deltalake import DeltaTable

    version = DeltaTable(path).version()
    entry = _entry(path, version)
    actions = _actions(entry)
    assert actions is not None, f"{entry} was written by this process and reads whole"
    added = [path / unquote(add["path"]) for add in _adds(actions)]
    checkpoint = sorted((path / LOG).glob(f"{version:020d}.checkpoint*.parquet"))
    last = [path / LOG / LAST_CHECKPOINT] if checkpoint else []
    sync_paths([*added, entry, *checkpoint, *last])
    sync_dir(path)


def repair_delta_tail(path: Path) -> list[str]:
    """Remove the table's unsynced tail a power cut left (the module's docstring says why this is
    exact); what was removed, one line each, for the run's log. A table that is not there, or
    whose tail is whole, is left as it is."""
    log_dir = path / LOG
    if not log_dir.is_dir():
        return []
    done = _repair_checkpoint(log_dir)
    entries = sorted((int(p.name.split(".")[0]), p) for p in log_dir.glob("*.json") if _is_entry(p))
    newest = entries[-1][0] if entries else None
    while entries:
        version, entry = entries[-1]
        torn = _torn_version(path, entry)
        if torn is None:
            break
        for file in torn:
            file.unlink(missing_ok=True)
        entry.unlink()
        entries.pop()
        done.append(
            f"removed version {version} of Delta table {path}, cut short by a crash; its batch goes again"
        )
    if newest is not None and (not entries or entries[-1][0] < newest):  # versions removed
        kept = entries[-1][0] if entries else -1
        stale = [c for c in log_dir.glob("*.checkpoint*.parquet") if int(c.name.split(".")[0]) > kept]
        for c in [*stale, *([log_dir / LAST_CHECKPOINT] if stale else [])]:
            c.unlink(missing_ok=True)  # a checkpoint of a removed version holds its files
    for _, entry in entries:
        if _actions(entry) is None:
            raise errors.RunDirectoryError(
                str(path),
                f"Delta log entry {entry} is damaged (empty or cut short, as a power cut can leave a"
                f" file written without a sync) and is not the newest (version {entries[-1][0]} is)",
                "restore the table from a copy, or remove it and --reset to start over",
            )
    if done:
        sync_dir(log_dir)
    return done


def _repair_checkpoint(log_dir: Path) -> list[str]:
    """Remove the newest checkpoint if it does not read whole (and ``_last_checkpoint``, which
    names it): the log entries it summarises are all still there, so the table reads without it."""
    checkpoints = sorted(log_dir.glob("*.checkpoint*.parquet"))
    last = log_dir / LAST_CHECKPOINT
    if not checkpoints:
        if not last.exists():
            return []
        last.unlink()  # it names a checkpoint a cut lost
        return [f"removed {last}, which names a checkpoint a crash lost"]
    version = checkpoints[-1].name.split(".")[0]
    newest = [c for c in checkpoints if c.name.startswith(f"{version}.")]
    whole = all(_reads_whole(c) for c in newest)
    if whole and last.exists():  # delta-rs finds the newest checkpoint itself without the file
        try:
            whole = int(json.loads(last.read_text())["version"]) == int(version)
        except (OSError, ValueError, KeyError, TypeError):
            whole = False
    if whole:
        return []
    for c in [*newest, last]:
        c.unlink(missing_ok=True)
    return [f"removed checkpoint {version} of Delta table {log_dir.parent}, cut short by a crash"]


def _torn_version(path: Path, entry: Path) -> list[Path] | None:
    """The data files of ``entry``'s version if it is torn (they go with it), None if it is whole:
    its entry parses, and every file it adds is there at the size it records."""
    actions = _actions(entry)
    if actions is None:
        return []  # what it added is unknown: orphaned files are never read (Delta reads its log)
    added = [(path / unquote(add["path"]), add.get("size")) for add in _adds(actions)]
    if all(file.is_file() and (size is None or file.stat().st_size == size) for file, size in added):
        return None
    return [file for file, _ in added]


def _reads_whole(checkpoint: Path) -> bool:
    import pyarrow.parquet as pq

    try:
        pq.ParquetFile(checkpoint).read()
    except Exception:  # pyarrow's many errors for a torn file (no footer, a short page) all mean torn
        return False
    return True


def _actions(entry: Path) -> list[dict[str, Any]] | None:
    """The entry's actions, or None if it is torn: empty, a line that does not parse, or a
    newline at its end (delta-rs writes none there, so the file was cut just after a line)."""
    with contextlib.suppress(OSError, ValueError, UnicodeDecodeError):
        text = entry.read_text()
        if text.strip() and not text.endswith("\n"):
            actions = [json.loads(line) for line in text.splitlines() if line.strip()]
            if all(isinstance(a, dict) for a in actions):
                return actions
    return None


def _adds(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a["add"] for a in actions if isinstance(a.get("add"), dict)]


def _entry(path: Path, version: int) -> Path:
    return path / LOG / f"{version:020d}.json"


def _is_entry(p: Path) -> bool:
    return p.name.split(".")[0].isdigit() and p.name.count(".") == 1
