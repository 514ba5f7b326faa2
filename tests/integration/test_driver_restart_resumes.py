"""A driver SIGKILLed mid-scale-up and started again with ``tidal run`` on the same run directory:
its controller resumes from the state the killed one saved (an event per vertex says so, with
the last scaling it kept), its first decisions are made on numbers (never "no data" for want of
a window), no vertex with a backlog goes to zero, and every message is delivered once (#57)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tidal.bench.chaos_checks import Fault, exactly_once, replica_drops_in_scale_ups, resumption
from tidal.isb.control import ControlStore
from tidal.observe.series import read_series

from .test_cli import lines, tidal
from .waits import eventually, wait_for

pytestmark = pytest.mark.spark

# The generator held at 3 replicas makes 1,500 messages a second; `work` takes 1 ms a message,
# so one replica falls behind, and with a 1 s processing target the controller scales it up
# while the run goes on, however busy the box is.
PIPELINE = """
name: restart
limits: {readBatchSize: 500}
controller: {intervalSeconds: 0.5}
vertices:
  - name: gen
    source:
      generator: {rate: 1500, maxMessages: 15000, msgSize: 30}
    scale: {min: 3, max: 3}
  - name: work
    udf: {map: "tidal.examples.udfs:slow_upper"}
    scale:
      lookbackSeconds: 120
      targetProcessingSeconds: 1
      scaleUpCooldownSeconds: 3
      scaleDownCooldownSeconds: 5
      max: 4
  - name: out
    sink: {file: {path: out.jsonl}}
edges:
  - {from: gen, to: work, chain: false}
  - {from: work, to: out}
"""


def events(run_dir) -> list[dict]:
    path = run_dir / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def test_a_restarted_driver_resumes_its_controller_and_delivers_every_message_once(tmp_path):
    total = 15_000
    spec = tmp_path / "p.yaml"
    spec.write_text(PIPELINE)
    run_dir = tmp_path / "run"
    args = ("run", str(spec), "--run-dir", str(run_dir), "--no-metrics", "--no-live")
    first = tidal(*args)
    try:

        def scaled_up() -> None:
            ups = [e for e in events(run_dir) if e["vertex"] == "work" and e["desired"] > e["current"] > 0]
            assert ups, "no scale-up of work yet"
            assert (run_dir / "controller.state").exists()

        eventually(scaled_up, 240, "a scale-up of work", proc=first)
        os.kill(first.pid, signal.SIGKILL)  # mid-run, just after a scale-up: the driver and controller
        first.wait(timeout=60)
    finally:
        first.kill()
    killed_at = len(events(run_dir))
    fault = Fault("driver", time.time(), "SIGKILL just after a scale-up")
    control = ControlStore(run_dir / "pipeline.db")
    replicas_at_kill = control.replicas("work")
    control.close()
    second = tidal(*args)
    try:

        def resumed() -> list[dict]:
            after = events(run_dir)[killed_at:]
            notes = [e for e in after if e["rule"] == "state-restored"]
            assert {e["vertex"] for e in notes} == {"gen", "work"}, after[:5]  # out runs in work's query
            work = [e for e in after if e["vertex"] == "work" and e["rule"] != "state-restored"]
            assert work, "no decision of work since the restart yet"
            return work

        work = eventually(resumed, 240, "the restored controller's first decision", proc=second)
        assert work[0]["rule"] not in ("metrics-unavailable", "warming-up"), work[0]
        assert work[0]["current"] == replicas_at_kill or work[0]["current"] > 0  # no cold start to min
        wait_for(lambda: len(set(lines(run_dir / "out.jsonl"))) >= total, 300, "every message", second)
        second.send_signal(signal.SIGTERM)
        out, _ = second.communicate(timeout=120)
    finally:
        second.kill()
    assert second.returncode == 0, out
    # The chaos bench's own checks (tidal.bench.chaos_checks), on this run's records.
    once = exactly_once(lines(run_dir / "out.jsonl"), (f"work:gen:{n}" for n in range(1, total + 1)))
    assert once.held, once.violations
    resumed_well = resumption(events(run_dir), [fault], tick=0.5)
    assert resumed_well.held, resumed_well.violations
    no_drop = replica_drops_in_scale_ups(list(read_series(run_dir)), "work", [fault])
    assert no_drop.held, no_drop.violations
