"""Drops by a source's own client (a core NATS subscription past its limit) are the run's drops,
with the reason ``source-overflow``, counted once through the reader's reports and a restart."""

from __future__ import annotations

from tidal.isb.control import ControlStore
from tidal.spark.sources.staged import StagedSourceReader


class _Config:
    vertex = "in"


class _Dropping:
    def __init__(self) -> None:
        self.dropped = 0


def _reader(source: object) -> StagedSourceReader:
    # Only what _record_drops uses: building a whole reader needs a run's buffers and spec.
    reader = StagedSourceReader.__new__(StagedSourceReader)
    reader.config = _Config()  # type: ignore[assignment]
    reader.source = source  # type: ignore[assignment]
    reader._drops_recorded = 0
    return reader


def test_source_drops_join_the_vertex_drops_with_their_reason(tmp_path):
    control = ControlStore(tmp_path / "c.db")
    control.record_batch("in", 0, 1, 10, 8, dropped=2)
    control.record_source_drops("in", 5)
    control.record_source_drops("in", 0)
    assert control.drops("in") == {"tags": 2, "source-overflow": 5}
    assert control.dropped("in") == 7


def test_the_reader_records_what_its_source_dropped_since_its_last_report_once(tmp_path):
    control = ControlStore(tmp_path / "c.db")
    source = _Dropping()
    reader = _reader(source)
    reader._record_drops(control)
    assert control.drops("in") == {}
    source.dropped = 15
    reader._record_drops(control)
    reader._record_drops(control)  # no new drops: nothing added
    source.dropped = 20
    reader._record_drops(control)
    assert control.drops("in") == {"source-overflow": 20}
    restarted = _reader(_Dropping())  # a new source object counts from 0
    restarted.source.dropped = 3  # type: ignore[attr-defined]
    restarted._record_drops(control)
    assert control.dropped("in") == 23
