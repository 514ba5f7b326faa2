"""A query that fails for a transient reason (a Python worker too slow to connect back on a busy
machine) is started again from its checkpoint, the restart is an event, and nothing is lost or
delivered twice."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark import cloudpickle

from tidal.spark.pipeline import PipelineRun
from tidal.spec import Pipeline
from tidal.testing import delivered, ids_of

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the UDF below travels by value


def fails_once(marker: Path):
    def udf(payload: bytes) -> bytes:
        if not marker.exists():
            marker.write_text("failed once")
            raise RuntimeError("Python worker failed to connect back.")  # what Spark says when slow
        return payload.upper()

    return udf


def test_a_transient_failure_restarts_the_query_from_its_checkpoint(spark, tmp_path):
    spec = (
        Pipeline("flaky")
        .source("gen", generator={"rate": 2000, "maxMessages": 2000, "msgSize": 20})
        .map("work", fails_once(tmp_path / "marker"), retries=0)
        .sink("out", "file", path="out.jsonl")
        .build()
    )
    with PipelineRun(spec, tmp_path / "run", spark=spark, trigger_seconds=0.25) as run:
        run.wait(120, until=lambda: len(delivered(tmp_path / "run" / "out.jsonl")) >= 2000)
    ids = ids_of(delivered(tmp_path / "run" / "out.jsonl"))
    assert len(ids) == len(set(ids)) == 2000  # the failed batch replayed: nothing lost, nothing twice
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    restarts = [e for e in events if e.get("rule") == "restarted"]
    assert len(restarts) == 1 and "Python worker failed to connect back" in restarts[0]["reason"]
    assert restarts[0]["vertex"] == "gen"  # the chain's query (gen > work > out)
