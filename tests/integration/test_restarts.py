"""A query that fails for a transient reason (a Python worker too slow to connect back on a busy
machine) is started again from its checkpoint, the restart is an event, and nothing is lost or
delivered twice."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pyspark import cloudpickle

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import Pipeline
from tidal.testing import delivered, ids_of

from .waits import eventually

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the UDF below travels by value


def fails_once(marker: Path):
    def udf(payload: bytes) -> bytes:
        if not marker.exists():
            marker.write_text("failed once")
            raise RuntimeError("Python worker failed to connect back.")  # what Spark says when slow
        return payload.upper()

    return udf


def events(path: Path) -> list[dict[str, Any]]:
    """The events written so far: read while the run writes, the last line may be unfinished."""
    text = path.read_text().rpartition("\n")[0] if path.exists() else ""
    return [json.loads(line) for line in text.splitlines()]


def test_a_transient_failure_restarts_the_query_from_its_checkpoint(spark, tmp_path):
    spec = (
        Pipeline("flaky")
        .source("gen", generator={"rate": 2000, "maxMessages": 2000, "msgSize": 20})
        .map("work", fails_once(tmp_path / "marker"), retries=0)
        .sink("out", "file", path="out.jsonl")
        .build()
    )

    def restarted_and_delivered() -> None:
        ids = ids_of(delivered(tmp_path / "run" / "out.jsonl"))
        assert len(ids) == len(set(ids)) == 2000, (len(ids), len(set(ids)))  # the failed batch replayed
        restarts = [e for e in events(tmp_path / "run" / "events.jsonl") if e.get("rule") == "restarted"]
        assert len(restarts) == 1, restarts
        assert "Python worker failed to connect back" in restarts[0]["reason"], restarts
        assert restarts[0]["vertex"] == "gen"  # the chain's query (gen > work > out)

    with PipelineRun(spec, tmp_path / "run", spark=spark, trigger_seconds=0.25) as run:

        def checked() -> None:
            run.check()  # the run's own check is what restarts the failed query (and names a real failure)
            restarted_and_delivered()

        eventually(checked, 300, "every message, and the restart's event", poll=0.5)
    restarted_and_delivered()  # nothing lost, nothing twice, one restart: also once stopped
