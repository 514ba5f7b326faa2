"""End-to-end latency on real Spark: every delivered message's delay, source to sink, recorded
at the sink's commit, shown in the status, the report and the metrics."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from tidal.observe.metrics import MetricsExporter
from tidal.observe.report import write_report
from tidal.scaling.latency import DelaySample
from tidal.spark.run.pipeline import PipelineRun, VertexStatus
from tidal.spec import Pipeline

from .waits import eventually

pytestmark = pytest.mark.spark


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_every_delivered_message_has_a_delay_from_its_source_time_to_the_sinks_commit(spark, tmp_path):
    spec = (
        Pipeline("lat", controller={"intervalSeconds": 0.5})
        .source(
            "gen", generator={"rate": 400, "msgSize": 40, "maxMessages": 4000}, scale={"min": 1, "max": 1}
        )
        .map("work", "tidal.examples.udfs:upper", scale={"min": 1, "max": 1})
        .sink("out", "file", path="out.jsonl", scale={"min": 1, "max": 1})
        .build()
    )
    run = PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25)
    out = tmp_path / "out.jsonl"
    exporter = MetricsExporter("lat", tmp_path / "events.jsonl")
    port = exporter.serve(0)
    with run:

        def every_delay_recorded() -> tuple[dict[str, VertexStatus], list[DelaySample]]:
            """The sink appends a batch's lines at its commit and records the batch's delays after
            them (tidal.spark.query.writer): all 4000 lines say nothing of the last batch's record."""
            run.check()
            assert lines(out) >= 4000, f"{lines(out)} of 4000 lines in the sink"
            samples = run.delivered_delays("out", 0.0)
            assert sum(s.count for s in samples) == 4000, f"{sum(s.count for s in samples)} delays recorded"
            # Taken at once: the status's delay is over the last seconds' batches (DELAY_WINDOW).
            status = {s.name: s for s in run.status()}
            assert status["out"].delay and status["gen"].delay is None  # sinks only
            return status, samples

        status, samples = eventually(every_delay_recorded, 300, "every delivered message's delay", poll=0.5)
        exporter.update_delays(run.delivered_delays, ["out"])
        due_from = float(run.control.meta("generator.gen.start") or "nan")  # message n due n/400 s later
        run.write_status("stopped")  # what `tidal run` leaves for the report
    assert status["out"].delay and status["gen"].delay is None  # sinks only
    assert sum(s.count for s in samples) == 4000  # every delivered message, once
    for s in samples:
        assert 0.0 < s.points[0] <= s.points[-1] <= s.at - due_from  # none older than the generator
    # The oldest message of the first batch is message 1, due 1/400 s after the generator started:
    # its delay is the time from then to the commit, which says the source time is the due time.
    # (A batch's record is written after its commit and may wait for the database: up to a
    # second is allowed; a source time taken when read would be short by Spark's whole start.)
    first = samples[0]
    since_due = first.at - due_from - 1 / 400
    assert since_due - 1.0 <= first.max <= since_due + 0.001
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    count = [line for line in text.splitlines() if line.startswith("tidal_delivery_delay_seconds_count")]
    assert count and float(count[0].split()[-1]) == pytest.approx(4000)
    exporter.server.shutdown()
    # The offset and commit logs are written without Hadoop's .crc checksum files (session.py).
    logs = [f for f in (tmp_path / "checkpoints").rglob("*") if f.is_file()]
    assert any(f.parent.name == "offsets" for f in logs)
    assert not [f for f in logs if f.name.endswith(".crc")]
    summary = write_report(tmp_path).read_text()
    assert "delivery delay, source to sink: out: p50" in summary
    assert (tmp_path / "report" / "latency.png").stat().st_size > 10_000
