"""The thread of the state-partition policy and the shuffle follower
(:class:`tidal.spark.run.ticker.Ticker`): a tick that raises is logged and the next one comes; a
paused pipeline gets none; stop ends the thread."""

from __future__ import annotations

import logging
import threading

from tidal.spark.run.ticker import Ticker


def test_a_failing_tick_is_logged_and_the_ticks_go_on(caplog):
    ticks: list[float] = []
    third = threading.Event()

    def tick(now: float) -> None:
        ticks.append(now)
        if len(ticks) >= 3:
            third.set()
        if len(ticks) == 1:
            raise RuntimeError("the policy broke")

    ticker = Ticker("test-ticks", "the test policy")
    with caplog.at_level(logging.ERROR, logger="tidal.pipeline"):
        ticker.start(tick, lambda: 0.01, lambda: False)
        try:
            assert third.wait(30), ticks
        finally:
            ticker.stop()
    assert any("the test policy failed" in r.getMessage() and r.exc_info for r in caplog.records)
    assert ticks == sorted(ticks)


def test_a_paused_pipeline_gets_no_tick_and_stop_ends_the_thread():
    asked = threading.Event()
    ticks: list[float] = []

    def paused() -> bool:
        asked.set()
        return True

    ticker = Ticker("test-paused", "the test policy")
    ticker.start(ticks.append, lambda: 0.01, paused)
    assert asked.wait(30)
    ticker.stop()
    assert ticks == []
    assert ticker._thread is not None and not ticker._thread.is_alive()
