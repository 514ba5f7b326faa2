"""Messages a source gave and Tidal could not store go back to it (``nack``), as Numaflow gives
them back: numaflow-python's simple source, unchanged (``tidal.examples.numaflow:SimpleSource``),
read into a real SQLite staging buffer whose write fails for real (the process may not grow a
file: a full disk, as the staging append sees one)."""

from __future__ import annotations

import contextlib
import resource
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidal.isb.control import ControlStore
from tidal.isb.sqlite import SqliteStore
from tidal.spark.batch.config import QueryConfig
from tidal.spark.sources.pynumaflow import CONNECTOR
from tidal.spec import Limits
from tidal.spec.model import SourceSpec


@contextlib.contextmanager
def no_file_may_grow() -> Iterator[None]:
    """Every write that would make a file longer fails (EFBIG) while inside: the disk is full."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def _reader(tmp_path: Path):  # type: ignore[no-untyped-def]
    db = tmp_path / "run.db"
    source = SourceSpec.model_validate({"pynumaflow": "tidal.examples.numaflow:SimpleSource"})
    config = QueryConfig(
        "p", "in", str(db), str(tmp_path), "in-staged", ("in-out",), Limits(read_batch_size=5), source=source
    )
    store = SqliteStore(db)
    store.create("in-staged")
    store.create("in-out")
    ControlStore(db).set_replicas("in", 1)
    return CONNECTOR.reader(config), store


def test_messages_read_and_not_stored_are_nacked_and_read_again(tmp_path):
    reader, store = _reader(tmp_path)
    sourcer = reader.source._sourcer  # the example's own instance: what it was told
    with no_file_may_grow(), pytest.raises(OSError, match="File too large"):
        reader.latestOffset({"seq": 0})
    assert store.open("in-staged").last_seq() == 0  # nothing stored
    offsets = set(sourcer.nacked)
    assert offsets and sourcer.to_ack_set == set()  # every offset read was given back, none left to ack
    end = reader.latestOffset({"seq": 0})  # the disk has room again: the source gives them again
    stored = [i for _, i, _ in store.open("in-staged").read_range(1, end["seq"])]
    assert {f"0:{o}" for o in offsets} <= set(stored) and len(stored) == len(set(stored))
    assert sourcer.nacked == set() and sourcer.to_ack_set == set()  # read again, stored, acknowledged


def test_a_stored_message_is_acknowledged_not_nacked(tmp_path):
    reader, store = _reader(tmp_path)
    sourcer = reader.source._sourcer
    end = reader.latestOffset({"seq": 0})
    assert end["seq"] == store.open("in-staged").last_seq() > 0
    assert sourcer.nacked == set() and sourcer.to_ack_set == set()


class Stamped:
    """A Tidal user source whose fourth message has an event time Tidal cannot read; it keeps
    what it was told, and gives nacked offsets again first."""

    def __init__(self) -> None:
        self.next, self.given_back, self.acked = 0, list[int](), list[int]()
        self.bad = True

    def read(self, n: int) -> list[tuple[int, bytes, object]]:
        offsets = self.given_back[:n] or list(range(self.next, self.next + n))
        self.given_back = self.given_back[len(offsets) :]
        self.next = max(self.next, offsets[-1] + 1)
        return [(o, b"%d" % o, "noon" if o == 3 and self.bad else 1_700_000_000.0 + o) for o in offsets]

    def ack(self, offsets: list[int]) -> None:
        self.acked.extend(offsets)

    def nack(self, offsets: list[int]) -> None:
        self.given_back.extend(offsets)

    def pending(self) -> float:
        return 0.0


def test_a_user_sources_batch_with_an_event_time_tidal_cannot_read_is_nacked_whole(tmp_path):
    from tidal.spark.sources.staged import StagedSourceReader

    reader, store = _reader(tmp_path)
    source = Stamped()
    staged = StagedSourceReader(reader.config, source)
    with pytest.raises(TypeError, match="an event time is seconds or a datetime, got str"):
        staged.latestOffset({"seq": 0})
    assert (
        source.given_back == [0, 1, 2, 3, 4]
        and source.acked == []
        and store.open("in-staged").last_seq() == 0
    )
    source.bad = False  # fixed: the same offsets come again, and are stored once
    end = staged.latestOffset({"seq": 0})
    assert [i for _, i, _ in store.open("in-staged").read_range(1, end["seq"])] == ["0", "1", "2", "3", "4"]
    assert source.acked == [0, 1, 2, 3, 4] and source.given_back == []
