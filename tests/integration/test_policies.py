"""`policy: kpa` on real Spark: the controller runs Knative's KPA for the vertices that name it
(on their arrival rate) and Numaflow's rules for the others, and every decision says which."""

from __future__ import annotations

import json

import pytest

from tidal.spark.pipeline import PipelineRun
from tidal.spec import parse_pipeline

pytestmark = pytest.mark.spark


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
    try:
        assert run.control is not None
        control = run.control
        run.wait(until=lambda: control.replicas("work") == 4, duration=90)
    finally:
        run.stop()
    assert control.replicas("work") == 4
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    work_rules = {e["rule"] for e in events if e["vertex"] == "work"}
    assert work_rules and all(rule.startswith("kpa-") for rule in work_rules), work_rules
    assert not any(e["rule"].startswith("kpa-") for e in events if e["vertex"] != "work")
    up = next(e for e in events if e["vertex"] == "work" and e["desired"] == 4)
    assert "4" in str(up["reason"])  # the reason says what it asked for


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
    try:
        assert run.control is not None
        control = run.control
        run.wait(until=lambda: control.replicas("in") >= 3, duration=90)
    finally:
        run.stop()
    assert control.replicas("in") >= 3
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
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
