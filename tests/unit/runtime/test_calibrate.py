"""Calibration helpers: the generator's load as a trace; a simulated vertex summarized as a real one."""

from __future__ import annotations

from tidal.observe.calibrate import _side, generator_trace
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


def test_a_simulated_vertex_is_summarized_like_the_report_summarizes_a_real_one() -> None:
    pending = [0, 5, 5, 0, 5, 5, 5, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 7, 7]
    side = _side([1] * 10 + [2] * 12, pending)
    assert side.drains == [6.0]  # 1..7 (the zero at 3 is a flicker); 13 is too short; 20.. is open
    assert (side.replica_seconds, side.peak) == (34.0, 2)
