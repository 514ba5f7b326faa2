"""What a reduce vertex's checkpoint says about its state partitions, read from Spark's own logs.

A stateful query's state is split into ``spark.sql.shuffle.partitions`` partitions, recorded in
every ``offsets/<batch>`` entry's conf from the first batch on: Spark takes that value, not the
session's, whenever the query starts again. So the checkpoint is the truth about a vertex's
count, and Tidal reads it from there rather than trusting a copy it keeps elsewhere.

Spark's offline repartition (``StreamingCheckpointManager.repartition``, Spark ≥ 4.2) rewrites
the state into a new count as one extra batch ``n+1`` that reads no input: measured on 4.3.0,
it writes ``offsets/<n+1>`` (the last batch's source offsets, the new count in its conf) first,
then the state's next version in every new partition, and ``commits/<n+1>`` last. The old
versions stay in place. A repartition that fails (or a driver killed during one) leaves
``offsets/<n+1>`` without its commit, and Spark then refuses to start the query
(``STREAMING_UNFINISHED_REPARTITION_DETECTED``) until a repartition to the same count completes.
:func:`unfinished_repartition` finds that case; :func:`abandon_repartition` undoes it so the
query runs again on the old count, replaying batch ``n+1`` as an ordinary batch.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SHUFFLE_KEY",
    "Unfinished",
    "abandon_repartition",
    "batch_partitions",
    "committed_partitions",
    "last_batch",
    "unfinished_repartition",
]

SHUFFLE_KEY = "spark.sql.shuffle.partitions"
# A state store's files of one version: HDFS-backed ``<v>.delta``/``<v>.snapshot``, RocksDB's
# ``<v>.zip``/``<v>.changelog`` (their SST files are shared between versions and left alone).
_VERSION_FILE = re.compile(r"^\.?(\d+)\.(delta|snapshot|zip|changelog)(\.crc)?$")


@dataclass(frozen=True, slots=True)
class Unfinished:
    """A repartition Spark began and did not commit: batch ``batch`` moving ``before`` → ``after``."""

    batch: int
    before: int | None
    after: int


def last_batch(log: Path) -> int | None:
    """The newest batch id in one of a checkpoint's logs (``offsets``, ``commits``); None: none."""
    if not log.is_dir():
        return None
    return max((int(e.name) for e in os.scandir(log) if e.name.isdigit()), default=None)


def batch_partitions(checkpoint: Path, batch: int) -> int | None:
    """The state partitions in ``offsets/<batch>``'s conf (None: no such entry, or none recorded)."""
    entry = checkpoint / "offsets" / str(batch)
    try:
        lines = entry.read_text().splitlines()
        conf = json.loads(lines[1]).get("conf", {})
    except (OSError, IndexError, ValueError, AttributeError):
        return None
    value = conf.get(SHUFFLE_KEY)
    return int(value) if value is not None and str(value).isdigit() else None


def committed_partitions(checkpoint: Path) -> int | None:
    """The state partitions the query runs with at its next start: those of its last committed
    batch (None before a first batch committed: the session's count applies then)."""
    committed = last_batch(checkpoint / "commits")
    return None if committed is None else batch_partitions(checkpoint, committed)


def unfinished_repartition(checkpoint: Path) -> Unfinished | None:
    """The repartition left uncommitted in ``checkpoint``, if its newest batch is one.

    An ordinary batch keeps the checkpoint's count, so a planned batch whose count differs from
    the last committed one's is a repartition's (the only writer of another count)."""
    planned = last_batch(checkpoint / "offsets")
    committed = last_batch(checkpoint / "commits")
    if planned is None or (committed is not None and committed >= planned):
        return None
    after = batch_partitions(checkpoint, planned)
    before = None if committed is None else batch_partitions(checkpoint, committed)
    if after is None or after == before:
        return None
    return Unfinished(planned, before, after)


def abandon_repartition(checkpoint: Path, unfinished: Unfinished) -> list[str]:
    """Undo an uncommitted repartition: remove its offset entry and the state versions it wrote
    (``<batch+1>``; the query writes them again when it runs that batch on the old count).
    Returns the files removed. Nothing committed is touched."""
    removed: list[str] = []
    offsets = checkpoint / "offsets"
    for name in (str(unfinished.batch), f".{unfinished.batch}.crc"):
        path = offsets / name
        if path.exists():
            path.unlink()
            removed.append(str(path))
    version = unfinished.batch + 1
    state = checkpoint / "state"
    if state.is_dir():
        for folder, _, files in os.walk(state):
            for name in files:
                match = _VERSION_FILE.match(name)
                if match is not None and int(match.group(1)) == version:
                    path = Path(folder) / name
                    path.unlink()
                    removed.append(str(path))
    return removed
