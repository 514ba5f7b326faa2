"""Spark's offset log made durable before Tidal acts on a batch (``buffers.durability: sync``).

Spark writes a query's checkpoint through Hadoop's local file system: ``offsets/<batch>`` before
the batch runs, ``commits/<batch>`` after its sink committed, each a temporary file renamed into
place, none synced. After a power cut the offset log may end a batch earlier than what Tidal's
sinks and buffers did: Spark would then plan that batch again from the previous end, over an
input the batch's commit already trimmed, under a batch id the sink already holds; the sink skips
it as a replay, and what the new plan read is lost. Worse, the batch's tasks append to the next
buffer under keys named after their ranges: a batch planned again over other ranges would append
the same messages under new keys. So a reader syncs the offset entry Spark just wrote (and, at
the first batch, the checkpoint's ``metadata`` and folders) when Spark asks it for the batch's
partitions: after the entry is written, before any task runs. A lost ``commits/<batch>`` only
makes Spark run the same batch again over the same offsets, which every sink and buffer already
takes as a replay.

Not covered: a reduce vertex's state store (``state/``), which Spark's executors write and
rename without a sync; a power cut there can leave a state version Spark cannot read, and the
query then fails at its restart with Spark's own error (docs/operations.md, "Durability").
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from tidal import errors
from tidal.isb.durability import sync_dir, sync_paths, write_durably

if TYPE_CHECKING:
    from tidal.spark.batch.config import QueryConfig

__all__ = ["checkpoint_of", "repair_checkpoint", "sync_batch_offsets", "sync_planned_batch"]


def checkpoint_of(run_dir: str | Path, head: str) -> Path:
    """The checkpoint of the query whose chain starts at ``head`` (``PipelineRun._start_query``)."""
    return Path(run_dir) / "checkpoints" / head


def sync_batch_offsets(checkpoint: Path, batch_id: int) -> None:
    """Sync ``offsets/<batch_id>``, the previous batch's ``commits`` entry (Spark wrote it before
    it planned this batch: so only the newest commit entry can be cut short by a crash, which
    :func:`repair_checkpoint` removes), and the names that lead to them."""
    offsets = checkpoint / "offsets"
    entry = offsets / str(batch_id)
    files = [entry] if entry.exists() else []
    done = checkpoint / "commits" / str(batch_id - 1)
    if batch_id > 0 and done.exists():
        files.append(done)
    metadata = checkpoint / "metadata"
    if batch_id == 0 and metadata.exists():
        files.append(metadata)
    if files:
        sync_paths(files)  # their folders too: offsets/, and the checkpoint for metadata
    if batch_id == 0:
        sync_dir(checkpoint)
        sync_dir(checkpoint.parent)


def sync_planned_batch(config: QueryConfig) -> None:
    """Under ``sync``, the offset entry of the batch Spark is planning (its newest), from a
    reader's ``partitions``: Spark wrote it just before it asked for them."""
    if config.durability != "sync":
        return
    checkpoint = checkpoint_of(config.run_dir, config.vertex)
    with contextlib.suppress(FileNotFoundError):
        entries = [int(e.name) for e in os.scandir(checkpoint / "offsets") if e.name.isdigit()]
        if entries:
            sync_batch_offsets(checkpoint, max(entries))


def _whole(entry: Path) -> bool:
    """Whether a log entry holds what Spark writes: a version line, then JSON lines."""
    try:
        lines = entry.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    if not lines or not lines[0].startswith("v"):
        return False
    try:
        for line in lines[1:]:
            json.loads(line)
    except ValueError:
        return False
    return True


def repair_checkpoint(checkpoint: Path) -> list[str]:
    """Mend what a crash cut short in a query's checkpoint, before Spark reads it; what was done.

    Spark renames each entry into place, and a rename reaches the disk before the data of a file
    that was not synced: after a power cut the newest ``offsets/<n>`` or ``commits/<n>`` can be
    empty, and Spark then refuses to start the query ("Incomplete log file"). Removing such a
    newest entry is exact: without ``commits/<n>`` Spark runs batch ``n`` again over the same
    offsets (a replay every sink and buffer recognises); without ``offsets/<n>`` the batch was
    never planned durably, so under ``sync`` none of its tasks ran (the reader syncs the entry
    before they do). An entry cut short that is not the newest cannot be repaired this way and is
    refused, naming the file.

    The ``metadata`` file (the query's id, written when the query is first built) can be cut short
    too, also after offsets were planned: a kill between Spark's write of ``offsets/0`` and the
    reader's sync, or a temporary file a kill left in ``offsets/``. Spark then fails on start with
    Jackson's "No content to map". It is written again with a new id: Tidal keys nothing on Spark's
    query id (sinks and buffers key on the run's id and the batch id), so the query resumes from
    its offset log exactly as it would have."""
    done: list[str] = []
    for log_name in ("commits", "offsets"):
        folder = checkpoint / log_name
        if not folder.is_dir():
            continue
        entries = sorted((int(e.name), Path(e.path)) for e in os.scandir(folder) if e.name.isdigit())
        torn = [(n, path) for n, path in entries if not _whole(path)]
        if not torn:
            continue
        newest = entries[-1][0]
        if [n for n, _ in torn] != [newest]:
            raise errors.RunDirectoryError(
                str(checkpoint.parent.parent),
                f"Spark's log entry {torn[0][1]} is damaged (empty or cut short, as a power cut can"
                " leave a file written without a sync) and is not the newest, so the batch cannot be"
                " replayed from it",
                "restore the run directory from a copy, or --reset to start over",
            )
        torn[0][1].unlink()
        done.append(f"removed {torn[0][1]}, cut short by a crash; Spark replays its batch")
    done.extend(_clear_unplanned(checkpoint))
    metadata = checkpoint / "metadata"
    if metadata.exists() and not _query_id(metadata):
        write_durably(metadata, json.dumps({"id": str(uuid.uuid4())}, separators=(",", ":")))
        done.append(f"wrote {metadata} again, cut short by a crash; the query keeps its offsets")
    return done


def _clear_unplanned(checkpoint: Path) -> list[str]:
    """Empty ``offsets/``, ``commits/`` and ``state/`` of a checkpoint that holds no planned batch.

    With no entry in ``offsets/`` Spark starts the query at batch 0, and since Spark 4.1 it first
    checks that these three folders are empty (``spark.sql.streaming.verifyCheckpointDirectoryEmpty
    OnStart``), counting any file: it then refuses with ``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``.
    A crash leaves files there: the temporary ``.0.<uuid>.tmp`` of an ``offsets/0`` never renamed
    into place, a state schema written while batch 0 was being planned, or what remained after the
    newest entry, cut short, was removed above. None of them holds a message: a batch's tasks run
    only once its offsets entry exists (under ``sync``, once it is synced), so with no entry no
    task ran. Removing them is what lets the query start at batch 0 as it would have."""
    offsets = checkpoint / "offsets"
    if not offsets.is_dir() or any(e.name.isdigit() for e in os.scandir(offsets)):
        return []
    done: list[str] = []
    for folder in (offsets, checkpoint / "commits", checkpoint / "state"):
        if not folder.is_dir():
            continue
        left = sorted(e.name for e in os.scandir(folder))
        if not left:
            continue
        for name in left:
            path = folder / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        sync_dir(folder)
        done.append(
            f"removed {', '.join(left)} from {folder}: a crash left them before the query planned"
            " its first batch, and Spark starts batch 0 only on empty folders"
        )
    return done


def _query_id(metadata: Path) -> str | None:
    """The query id Spark wrote in a checkpoint's ``metadata``; None if it is cut short."""
    try:
        data = json.loads(metadata.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None
