"""Spark's offset log made durable before Tidal acts on a batch (``buffers.durability: sync``).

Spark writes a query's checkpoint through Hadoop's local file system: ``offsets/<batch>`` before
the batch runs, ``commits/<batch>`` after its sink committed, each a temporary file renamed into
place, none synced. After a power cut the offset log may end a batch earlier than what Tidal's
sinks and buffers did: Spark would then plan that batch again from the previous end, over an
input the batch's commit already trimmed, under a batch id the sink already holds; the sink skips
it as a replay, and what the new plan read is lost. So the writer's commit syncs the batch's
offset entry (and, at the first batch, the checkpoint's ``metadata`` and folders) before the
sink commits or the input is trimmed. A lost ``commits/<batch>`` only makes Spark run the same
batch again over the same offsets, which every sink and buffer already takes as a replay.

Not covered: a reduce vertex's state store (``state/``), which Spark's executors write and
rename without a sync; a power cut there can leave a state version Spark cannot read, and the
query then fails at its restart with Spark's own error (docs/operations.md, "Durability").
"""

from __future__ import annotations

from pathlib import Path

from tidal.isb.durability import sync_dir, sync_paths

__all__ = ["checkpoint_of", "sync_batch_offsets"]


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
