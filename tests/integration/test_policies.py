"""`policy: kpa` on real Spark: the controller runs Knative's KPA for the vertices that name it
(on their arrival rate) and Numaflow's rules for the others, and every decision says which."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import parse_pipeline

from .waits import eventually

pytestmark = pytest.mark.spark


def logged(run_dir: Path) -> list[dict]:
    """The decisions in the event log; read while the controller appends, a half-written last
    line is not one yet."""
    path = run_dir / "events.jsonl"
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.rpartition("\n")[0].splitlines() if line.strip()]


def test_kpa_scales_a_vertex_on_its_arrival_rate_and_numaflow_the_others(spark, tmp_path):
    spec = parse_pipeline(
        {
            "name": "kpa",
            "limits": {"readBatchSize": 200},
            "controller": {"intervalSeconds": 0.5},
            "vertices": [
                {"name": "in", "source": {"generator": {"rate": 3000}}, "scale": {"max": 2}},
                {
                    "name": "work",
                    "udf": {"map": "tidal.examples.udfs:upper"},
                    "policy": "kpa",
                    # 500 msg/s a replica at 70 %: 3000/s arriving wants 9, capped at 4
                    "kpa": {"target": 500, "window": "6s", "max-scale": 4},
                },
                {"name": "out", "sink": {"blackhole": {}}},
            ],
            # work keeps its buffer and its own policy; out runs in work's query.
            "edges": [{"from": "in", "to": "work", "chain": False}, {"from": "work", "to": "out"}],
        }
    )
    run = PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25).start()

    def work_at_four_by_kpa() -> None:
        """The controller sets the replicas, then logs the decision: the wait is on both."""
        assert run.control is not None
        assert run.control.replicas("work") == 4, run.control.replicas("work")
        events = logged(tmp_path)
        work_rules = {e["rule"] for e in events if e["vertex"] == "work"}
        assert work_rules and all(rule.startswith("kpa-") for rule in work_rules), work_rules
        assert not any(e["rule"].startswith("kpa-") for e in events if e["vertex"] != "work")
        ups = [e for e in events if e["vertex"] == "work" and e["desired"] == 4]
        assert ups, "no decision for 4 logged yet"
        assert "4" in str(ups[0]["reason"])  # the reason says what it asked for

    def running() -> None:
        run.check()  # a failed query ends the wait with its error
        work_at_four_by_kpa()

    try:
        eventually(running, 180, "KPA to scale work to 4")
    finally:
        run.stop()
    work_at_four_by_kpa()  # and still, in the final record and the whole log


def test_tidal_sizes_a_source_by_what_it_sustains_in_micro_batches(spark, tmp_path):
    """`policy: tidal` on real Spark. A generator's tasks read tens of thousands of messages a
    second, but a replica admits 200 per micro-batch and each batch costs a fixed part outside
    the tasks, so one replica cannot take 3000/s: the policy must ask for more than busy time
    alone says, and say what a batch cost it."""
    spec = parse_pipeline(
        {
            "name": "adaptive",
            "policy": "tidal",
            "limits": {"readBatchSize": 200},
            "controller": {"intervalSeconds": 0.5},
            "vertices": [
                {"name": "in", "source": {"generator": {"rate": 3000}}, "scale": {"max": 4}},
                {"name": "out", "sink": {"blackhole": {}}, "scale": {"max": 4}},
            ],
            "edges": [{"from": "in", "to": "out"}],
        }
    )
    run = PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25).start()

    def sized_up_by_batch_cost() -> None:
        """The controller sets the replicas, then logs the decision: the wait is on both."""
        assert run.control is not None
        assert run.control.replicas("in") >= 3, run.control.replicas("in")
        events = logged(tmp_path)
        ups = [e for e in events if e["vertex"] == "in" and e["desired"] > e["current"]]
        assert ups and all(e["rule"] in ("scale-up", "wake-on-pending") for e in ups), ups
        last = ups[-1]
        assert "s a batch" in last["reason"] and "per replica" in last["reason"], last["reason"]
        inputs = last["inputs"]
        # What a replica sustains, 200 / (batch cost + 200 / work rate), is well below what its
        # tasks do while they work (busy time): sized on busy time, 1-2 replicas would have looked
        # enough (3000/s against a work rate of 3,000-30,000/s, cold to warm).
        assert inputs["capacity"] * 2 < inputs["work_rate"], inputs
        assert inputs["batch_cost"] > 0.05, inputs

    def running() -> None:
        run.check()  # a failed query ends the wait with its error
        sized_up_by_batch_cost()

    try:
        eventually(running, 180, "the tidal policy to size the source at 3 or more")
    finally:
        run.stop()
    sized_up_by_batch_cost()  # and still, in the final record and the whole log
