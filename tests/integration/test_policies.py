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
            "limits": {"readBatchSize": BATCH},
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


BATCH = 200  # readBatchSize of the test below


def test_tidal_sizes_a_source_by_what_it_sustains_in_micro_batches(spark, tmp_path):
    """`policy: tidal` on real Spark. A replica admits 200 per micro-batch and each batch costs
    a fixed part outside the tasks, so one replica cannot take 3000/s: the policy must size on
    what a replica sustains, less than its tasks' busy time says, and say what a batch cost it.

    How much less depends on the machine: ``B / (batch cost + B / work rate)`` is below half
    the work rate only where the batch's fixed part outweighs a task's time. A fast box's tasks
    read 3,000-30,000/s (a replica sustained under half of it); a loaded 2-core box's took
    ~0.43 s a task whatever it held (430-520/s at 200 a batch, 116/s at 50), and an assertion of
    "under half" failed there by a few percent. So the test checks that the batch cost is in
    the capacity the decision used, which holds at any speed."""
    spec = parse_pipeline(
        {
            "name": "adaptive",
            "policy": "tidal",
            "limits": {"readBatchSize": BATCH},
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
        # What a replica sustains, 200 / (batch cost + 200 / the tasks' rate at a full batch), is
        # what the decision sized with: below what its tasks do while they work (busy time),
        # by a batch cost Spark's micro-batches do have. On a fast box, sized on busy time
        # alone, 1-2 replicas would have looked enough (3000/s against 3,000-30,000/s).
        assert inputs["batch_cost"] > 0.05, inputs
        sustained = BATCH / (inputs["batch_cost"] + BATCH / inputs["full_batch_rate"])
        assert inputs["capacity"] == pytest.approx(sustained, rel=1e-6), inputs
        assert inputs["capacity"] < inputs["work_rate"] <= inputs["full_batch_rate"], inputs

    def running() -> None:
        run.check()  # a failed query ends the wait with its error
        sized_up_by_batch_cost()

    try:
        eventually(running, 180, "the tidal policy to size the source at 3 or more")
    finally:
        run.stop()
    sized_up_by_batch_cost()  # and still, in the final record and the whole log
