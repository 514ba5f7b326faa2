"""The run's status read through a buffer outage (:class:`tidal.spark.run.status.StatusThroughOutages`):
the chaos bench's 30 s cut made ``tidal run`` exit on a status read that timed out."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import nats.errors
import pytest

from tidal.spark.run.status import StatusThroughOutages


class Outage(Exception):
    pass


def run_that(fails: BaseException | None):
    """A run whose status read raises ``fails`` (a buffer server that does not answer), else
    reads on: the first thing :func:`vertex_statuses` asks is the controller's decisions."""

    def decisions():
        if fails is not None:
            raise fails
        return {}

    return SimpleNamespace(
        control=object(), buffers=object(), controller=SimpleNamespace(decisions=decisions), spec=None
    )


def test_an_outage_keeps_the_last_status_and_says_so_once(monkeypatch, caplog):
    keeper = StatusThroughOutages()
    seen = [object()]
    monkeypatch.setattr(
        "tidal.spark.run.status.vertex_statuses", lambda run: run.controller.decisions() or seen
    )
    assert keeper.read(run_that(None)) == seen
    with caplog.at_level(logging.WARNING, logger="tidal.pipeline"):
        assert keeper.read(run_that(nats.errors.TimeoutError())) == seen
        assert keeper.read(run_that(nats.errors.NoServersError())) == seen
        assert keeper.read(run_that(None)) == seen
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "do not answer" in lines[0] and "answer again" in lines[1]


def test_any_other_failure_is_raised(monkeypatch):
    keeper = StatusThroughOutages()
    monkeypatch.setattr("tidal.spark.run.status.vertex_statuses", lambda run: run.controller.decisions())
    with pytest.raises(Outage):
        keeper.read(run_that(Outage("a bug, not an outage")))
