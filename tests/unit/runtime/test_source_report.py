"""A source's report and the vertex's processed count are a snapshot only together: a reader
reports what is pending at the start of a micro-batch, and the batch's messages count as
processed when it commits. What was processed since a report comes off it, or a batch that
committed after the report counts twice (as processed, and as pending) until the next report,
which a query stopped for a replica change does not make for seconds."""

from __future__ import annotations

import pytest

from tidal.controller.probe import StoreProbe
from tidal.isb.control import ControlStore
from tidal.isb.sqlite import SqliteStore
from tidal.spec import Pipeline


def test_a_report_keeps_the_processed_count_it_was_made_at(tmp_path):
    control = ControlStore(tmp_path / "c.db")
    control.record_batch("in", 0, 1, 500)
    control.report_source("in", 900.0)  # at the start of batch 1: 900 due past the 500 done
    report = control.source_report("in")
    assert report is not None and (report.pending, report.processed) == (900.0, 500.0)
    control.record_batch("in", 1, 1, 400)  # batch 1 commits; the query stops before reporting
    assert report.pending_now(control.progress("in").processed) == 500.0
    assert report.pending_now(5_000.0) == 0.0  # never below nothing


def test_a_report_from_before_the_count_was_kept_reads_as_it_is(tmp_path):
    control = ControlStore(tmp_path / "c.db")
    with control._store.transaction() as db:  # a run started by an older Tidal
        db.execute("DROP TABLE reports")
        db.execute(
            "CREATE TABLE reports (vertex TEXT PRIMARY KEY, pending REAL, error TEXT NOT NULL, "
            "at REAL NOT NULL)"
        )
        db.execute("INSERT INTO reports VALUES ('in', 700, '', 0)")
    reopened = ControlStore(tmp_path / "c.db")
    report = reopened.source_report("in")
    assert report is not None and report.processed is None and report.pending_now(300.0) == 700.0
    reopened.report_source("in", None, "consumer lag not available")
    after = reopened.source_report("in")
    assert after is not None and after.pending is None and after.pending_now(300.0) is None


def test_the_controller_reads_a_source_as_arrived_at_the_report(tmp_path):
    """``arrived`` (processed + pending) stays what had arrived when the report was made, where
    it jumped by the committed batch while the query was stopped."""
    spec = (
        Pipeline("t")
        .source("in", generator={"rate": 0})
        .map("work", "tidal.examples.udfs:upper")
        .sink("out", "blackhole")
        .build()
    )
    store = SqliteStore(tmp_path / "b.db")
    control = ControlStore(tmp_path / "c.db")
    probe = StoreProbe(spec, store, control)
    control.record_batch("in", 0, 1, 500)
    control.report_source("in", 900.0)
    before = probe.sample("in")
    control.record_batch("in", 1, 1, 500)
    after = probe.sample("in")
    assert before.pending is not None and after.pending is not None
    assert before.processed + before.pending == pytest.approx(1400.0)
    assert after.processed + after.pending == pytest.approx(1400.0)


def test_a_sample_of_a_source_says_how_old_its_report_is(tmp_path):
    """The report is as of when the reader made it, and the rates span those times
    (``tidal.controller.arrivals``): a long micro-batch makes no report."""
    spec = Pipeline("t").source("in", generator={"rate": 0}).sink("out", "blackhole").build()
    control = ControlStore(tmp_path / "c.db")
    probe = StoreProbe(spec, SqliteStore(tmp_path / "b.db"), control)
    control.report_source("in", 900.0)
    assert probe.sample("in").age == pytest.approx(0.0, abs=1.0)
    with control._store.transaction() as db:
        db.execute("UPDATE reports SET at = at - 2.0 WHERE vertex = 'in'")  # made 2 s ago
    assert probe.sample("in").age == pytest.approx(2.0, abs=1.0)


def test_a_report_older_than_the_staleness_rule_says_nothing_about_now():
    from tidal.isb.control import STALE_REPORT_SECONDS, SourceReport

    report = SourceReport(900.0, "", at=1000.0, processed=500.0)
    assert report.current(600.0, now=1000.0 + STALE_REPORT_SECONDS) == 800.0
    assert report.current(600.0, now=1000.0 + STALE_REPORT_SECONDS + 1) is None
    assert report.current(600.0, now=1005.0, stale_after=4.0) is None
