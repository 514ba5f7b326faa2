"""Knative's activator concurrency reporter, ported: ``TestStats``
(``pkg/activator/handler/concurrency_reporter_test.go``) onto
:class:`tidal.scaling.request_stats.ConcurrencyReporter`. Upstream's messages carry a request
count per period; Tidal's report carries requests per second, so the count is rps × period."""

from __future__ import annotations

import pytest

from tidal.scaling.request_stats import ConcurrencyReporter


def play(ops):
    """``("start", t)``, ``("end", t)``, ``("tick", t)`` → the stat messages, as (concurrency, count)."""
    reporter = ConcurrencyReporter()
    out = []
    for op, t in ops:
        if op == "start":
            if reporter.request_in(t):
                out.append((1.0, 1.0))
        elif op == "end":
            reporter.request_out(t)
        else:
            stat = reporter.report(t)
            if stat is not None:
                out.append(
                    (stat.average_concurrency, round(stat.requests_per_second * max(stat.period, 1.0), 9))
                )
    return out


@pytest.mark.parametrize(
    ("ops", "want"),
    [
        pytest.param([("start", 0)], [(1, 1)], id="scale-from-zero sends stat"),
        pytest.param(
            [("start", 0), ("end", 1), ("start", 1), ("end", 2), ("tick", 2)], [(1, 1), (0, 1)], id="in'n out"
        ),
        pytest.param(
            [("start", 0), ("start", 0), ("tick", 1), ("tick", 2)],
            [(1, 1), (1, 1), (2, 0)],
            id="scale to two",
        ),
        pytest.param(
            [("start", 0), ("end", 1), ("tick", 1), ("tick", 2), ("start", 3)],
            [(1, 1), (0, 0), (0, 0), (1, 1)],
            id="scale-from-zero after tick sends stat",
        ),
    ],
)
def test_stats(ops, want):
    assert play(ops) == want


def test_no_entry_no_message():
    assert ConcurrencyReporter().report(5.0) is None
