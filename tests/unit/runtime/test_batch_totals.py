"""The ledger's running totals: what the probe, a source's report and the drop counters read,
kept with each batch instead of summed over the run, and equal to that sum whatever happened
(replays, chains, an older run's file)."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from tidal.isb.batch_ledger import MemberBatch, Progress
from tidal.isb.control import ControlStore


def summed(path, vertex: str) -> tuple:
    """The totals the slow way: a sum over every recorded batch of ``vertex``."""
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT coalesce(sum(rows), 0), coalesce(sum(busy), 0), coalesce(sum(tasks), 0), "
            "coalesce(sum(dead), 0), coalesce(sum(dropped), 0), coalesce(sum(retried), 0) "
            "FROM batches WHERE vertex=?",
            (vertex,),
        ).fetchone()


def test_a_replay_replaces_its_first_recording_in_the_totals(tmp_path):
    control = ControlStore(tmp_path / "c.db")
    control.record_batch("v", 0, 2, 100, busy=1.0, dead=3, dropped=4, retried=5)
    control.record_batch("v", 1, 2, 50, busy=0.5)
    control.record_batch("v", 1, 3, 70, busy=0.75, dead=1)  # batch 1 replayed, read more
    assert control.progress("v") == Progress(170, 1.75, 5)
    assert (control.dead_letters("v"), control.dropped("v"), control.sink_retried("v")) == (4, 4, 5)
    assert control.progress("nothing yet") == Progress(0, 0.0, 0)


def test_a_chain_s_members_are_totalled_under_their_own_names(tmp_path):
    control = ControlStore(tmp_path / "c.db")
    member = MemberBatch("sink", rows=90, written=90, busy=0.2, dead=2)
    control.record_batch("head", 0, 2, 100, 90, busy=0.5, members=[member])
    control.record_batch("head", 0, 2, 100, 90, busy=0.5, members=[member])  # a replay
    assert control.progress("sink") == Progress(90, 0.2, 2)
    assert control.dead_letters("sink") == 2
    assert control.progress("head") == Progress(100, 0.5, 2)


def test_a_source_s_report_takes_the_total_it_was_made_at(tmp_path):
    control = ControlStore(tmp_path / "c.db")
    control.record_batch("src", 0, 1, 400)
    control.report_source("src", 1000.0)
    report = control.source_report("src")
    assert report is not None and report.processed == 400.0


def test_an_older_run_s_file_gets_its_totals_summed_once_when_opened(tmp_path):
    path = tmp_path / "c.db"
    control = ControlStore(path)
    control.record_batch("v", 0, 2, 100, busy=1.0, dead=1)
    control.record_batch("v", 1, 2, 30, busy=0.5)
    del control
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE batch_totals")  # as a run before the totals left it
    reopened = ControlStore(path)
    assert reopened.progress("v") == Progress(130, 1.5, 4)
    assert reopened.dead_letters("v") == 1
    reopened.record_batch("v", 2, 1, 10)
    assert reopened.progress("v").processed == 140


batches = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.integers(0, 5),  # batch id: repeats are replays
        st.integers(1, 4),
        st.integers(0, 1000),
        st.integers(0, 10),
        st.integers(0, 10),
        st.integers(0, 10),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(recorded=batches)
def test_the_totals_are_always_the_sum_over_the_batches(tmp_path_factory, recorded):
    path = tmp_path_factory.mktemp("totals") / "c.db"
    control = ControlStore(path)
    for vertex, batch_id, tasks, rows, dead, dropped, retried in recorded:
        busy = rows / 1000
        control.record_batch(
            vertex, batch_id, tasks, rows, busy=busy, dead=dead, dropped=dropped, retried=retried
        )
    for vertex in ("a", "b"):
        rows, busy, tasks, dead, dropped, retried = summed(path, vertex)
        progress = control.progress(vertex)
        assert (progress.processed, progress.tasks) == (rows, tasks)
        assert abs(progress.busy - busy) < 1e-9
        assert (control.dead_letters(vertex), control.dropped(vertex), control.sink_retried(vertex)) == (
            dead,
            dropped,
            retried,
        )
