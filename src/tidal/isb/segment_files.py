"""The files of one SQLite buffer's segments: written aside, renamed into place, read, swept.

Each segment (:mod:`tidal.isb.segments`) is one file in the buffer's directory, named by its last
sequence; the SQLite row that indexes it is inserted in the same transaction as the rename, so a
reader that sees the row finds the file. A writer stages its file under a temporary name that
carries its PID before it takes the write lock (the lock is then held for a rename and two small
inserts only); a writer that died leaves that file behind, and the sweep, run after each commit,
removes it together with the files of trimmed segments.

Under ``buffers.durability: sync`` (:mod:`tidal.isb.durability`) a staged file's data is synced
before the write lock is taken (so the sync costs the other writers nothing), and the rename that
names it is made durable by a sync of the directory before the row's transaction commits: a row
that survives a power cut always finds its whole file. Under ``os`` neither is synced.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from tidal import errors
from tidal.isb import segments
from tidal.isb.durability import DEFAULT, Durability, replace_durably, sync_file
from tidal.processes import alive

__all__ = ["SegmentFiles"]

_TMP = ".tmp-"


class SegmentFiles:
    """The segment files of the buffer ``name`` in ``directory``."""

    def __init__(self, directory: Path, name: str, durability: Durability = DEFAULT) -> None:
        self.directory = directory
        self.name = name
        self.durability = durability

    def stage(self, batch: Any) -> tuple[Path, int]:
        """Write ``batch`` to a temporary file of this process; its path and size."""
        data = segments.encode(batch)
        path = self.directory / f"{_TMP}{os.getpid()}-{uuid.uuid4().hex}"
        try:
            with open(path, "wb") as out:
                out.write(data)
                if self.durability == "sync":
                    out.flush()
                    sync_file(out.fileno())
        except FileNotFoundError as exc:  # the directory went with the buffer
            raise errors.BufferNotFound(self.name) from exc
        return path, data.size

    def place(self, staged: Path, last: int) -> None:
        """A staged file becomes the segment ending at sequence ``last`` (durably under ``sync``:
        called inside the row's transaction, before its commit)."""
        replace_durably(staged, self.directory / str(last), self.durability)

    def load(self, seq: int, size: int) -> Any:
        """The segment ending at ``seq``, checked against the ``size`` its row records."""
        import pyarrow as pa

        path = self.directory / str(seq)
        try:
            with pa.OSFile(str(path), "r") as source:
                data = source.read_buffer()
        except OSError:
            if path.exists():
                raise
            # Trimmed meanwhile (the caller reads again past it), whichever call found it gone:
            # pyarrow's open, or its stat of the open file on a file system that forgets the name.
            raise FileNotFoundError(str(path)) from None
        if data.size != size:
            raise self._damaged(path, f"holds {data.size} bytes", size)
        return data

    def verify(self, rows: list[tuple[int, int]]) -> None:
        """Every segment ``(seq, size)`` the rows name is there with that many bytes. Under
        ``durability: os`` a power cut can keep a row and lose its file's bytes; a run checks at
        its start, so the error names the file before a task fails on it."""
        for seq, size in rows:
            path = self.directory / str(seq)
            found = path.stat().st_size if path.exists() else None
            if found != size:
                raise self._damaged(path, "is missing" if found is None else f"holds {found} bytes", size)

    def _damaged(self, path: Path, held: str, size: int) -> errors.BufferError:
        return errors.BufferError(
            f"buffer {self.name!r}: segment file {path} {held}, its row says {size}: a crash damaged"
            " it (a power cut under buffers.durability: os?); restore the run directory from a copy,"
            " or start over with --reset"
        )

    def sweep(self, committed: int) -> None:
        """Delete the files of trimmed segments (named by their last sequence) and the
        temporary files of writers that died before their rename."""
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return
        for entry in entries:
            name = entry.name
            trimmed = name.isdigit() and int(name) <= committed
            orphaned = name.startswith(_TMP) and not alive(int(name[len(_TMP) :].split("-", 1)[0]))
            if trimmed or orphaned:
                Path(entry.path).unlink(missing_ok=True)  # another process may have swept it first
