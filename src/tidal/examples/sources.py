"""An example user-defined source, referenced from YAML as ``tidal.examples.sources:LinesSource``.

Numaflow's user-defined source contract, in Python:

- ``read(n)`` returns up to ``n`` messages as ``(offset, payload)`` pairs, or ``(offset,
  payload, event_time)`` triples (seconds since the epoch, or a ``datetime``): the event time
  becomes the message's source time, which a reduce windows it by. Offsets identify messages: a
  message delivered again after a crash must come with the same offset.
- ``ack(offsets)``: Tidal stored these durably; the source may forget them.
- ``pending()``: how many messages wait in the source; a negative number means "not available".
  Raising is fine too: Tidal logs it, treats it as not available and keeps running.

:class:`LinesSource` reads a text file line by line (think of a log file someone appends to).
The offset is the line number; the acknowledged position lives in the run directory
(``state_dir``, which Tidal passes to a source that takes it), so a restarted pipeline continues
after the last line it stored, and another run (a dry run, a second pipeline) reads the file
from its first line without touching this run's position. The input file is never written.
``pending()`` raises while the file does not exist, which is how the tests see the "pending()
fails" rule in action. With ``timestamps: true`` each line is ``<event time> <payload>`` (the
time in seconds since the epoch), for event-time pipelines: the reduce tests feed it late data.
"""

from __future__ import annotations

from pathlib import Path


class LinesSource:
    def __init__(self, path: str, state_dir: str | None = None, timestamps: bool = False) -> None:
        self.path = Path(path)
        self.timestamps = timestamps
        if state_dir is None:  # outside Tidal: a position beside the input, as a plain script would
            self.offset_file = self.path.with_name(self.path.name + ".offset")
        else:
            self.offset_file = Path(state_dir) / "offset"
        self._lines: list[bytes] = []
        self._mtime = -1.0

    def _acked(self) -> int:
        try:
            return int(self.offset_file.read_text() or 0)
        except FileNotFoundError:
            return 0

    def _all(self) -> list[bytes]:
        stat = self.path.stat()  # FileNotFoundError while there is no file
        if stat.st_mtime != self._mtime:
            self._lines = self.path.read_bytes().splitlines()
            self._mtime = stat.st_mtime
        return self._lines

    def read(self, n: int) -> list[tuple[int, bytes]] | list[tuple[int, bytes, float]]:
        if not self.path.exists():
            return []
        start = self._acked()  # Tidal acks what it stored before it reads again
        lines = self._all()[start : start + n]
        if not self.timestamps:
            return [(start + i + 1, line) for i, line in enumerate(lines)]
        timed = [line.split(b" ", 1) for line in lines]
        return [
            (start + i + 1, rest[1] if len(rest) > 1 else b"", float(rest[0])) for i, rest in enumerate(timed)
        ]

    def ack(self, offsets: list[int]) -> None:
        if offsets:
            tmp = self.offset_file.with_name(self.offset_file.name + ".tmp")
            tmp.write_text(str(max(*offsets, self._acked())))
            tmp.replace(self.offset_file)

    def pending(self) -> int:
        return len(self._all()) - self._acked()
