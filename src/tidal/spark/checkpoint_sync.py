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
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tidal.isb.durability import sync_dir, sync_paths

if TYPE_CHECKING:
    from tidal.spark.config import QueryConfig

__all__ = ["checkpoint_of", "sync_batch_offsets", "sync_planned_batch"]


def checkpoint_of(run_dir: str | Path, head: str) -> Path:
    """The checkpoint of the query whose chain starts at ``head`` (``PipelineRun._start_query``)."""
    return Path(run_dir) / "checkpoints" / head


def sync_batch_offsets(checkpoint: Path, batch_id: int) -> None:
    """Sync ``offsets/<batch_id>`` and the names that lead to it."""
    offsets = checkpoint / "offsets"
    entry = offsets / str(batch_id)
    files = [entry] if entry.exists() else []
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
