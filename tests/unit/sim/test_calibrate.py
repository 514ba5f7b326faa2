"""Calibration helpers: the generator's load as a trace, and drains counted as the report does."""

from __future__ import annotations

from tidal.sim.calibrate import _drains, generator_trace
from tidal.spec import LoadShape, Pipeline


def test_the_generator_trace_adds_up_to_the_load_shape() -> None:
    spec = (
        Pipeline("w")
        .source("in", generator={"shape": "bursty", "rate": 0, "peak": 900, "period": 110, "duration": 40})
        .sink("out", "blackhole")
        .build()
    )
    trace = generator_trace(spec, 220)
    shape = LoadShape("bursty", 0, 900, 0, 40, 110)
    assert sum(trace.rates) == shape.total(220)
    assert trace.rates[10] == 900 and trace.rates[60] == 0


def test_drains_ignore_flickers_and_short_spells_like_the_report() -> None:
    pending = [0, 5, 5, 0, 5, 5, 5, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 7, 7]
    assert _drains(pending) == [6.0]  # 1..7 (the zero at 3 is a flicker); 13 is too short; 20.. is open
