"""A stateless SQL step whose join shuffles (issue #60, part 3): its shuffle partitions start at
its replicas' count and follow them, by a restart between two batches, every order priced once
through it; a step whose join is broadcast (no shuffle) is never restarted."""

from __future__ import annotations

import json

import pytest

from tidal.spark.run.pipeline import PipelineRun
from tidal.spark.run.shuffle_follower import last_plan, shuffle_counts

from .test_steps import SQL, expected, spec, totals, write_orders, write_skus
from .waits import eventually

pytestmark = pytest.mark.spark

# The same join as the other steps' tests, hinted to a sort-merge join: a reference table too big
# to broadcast, whose join shuffles both sides into spark.sql.shuffle.partitions.
SHUFFLED = SQL.replace("SELECT _id", "SELECT /*+ SHUFFLE_MERGE(s) */ _id")


def _events(run, rule: str) -> list[dict]:
    lines = (run.run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["rule"] == rule]


def test_a_shuffling_steps_partitions_follow_its_replicas_by_a_restart_exactly_once(spark, tmp_path):
    write_skus(tmp_path / "skus")
    write_orders(tmp_path / "orders.jsonl", 0, 300, bad=False)
    run = PipelineRun(
        spec(tmp_path, sql=SHUFFLED), tmp_path / "run", spark=spark, trigger_seconds=0.25
    ).start()
    try:
        assert run.control is not None and run.shuffles is not None
        assert run.shuffles.steps == ["price"]

        def on_one() -> None:
            assert totals(tmp_path / "run") == expected(0, 300)
            plan = last_plan(run.queries["price"])
            assert plan is not None and set(shuffle_counts(plan)) == {1}, plan

        eventually(on_one, 240, "the first orders, joined in one shuffle partition", run=run, poll=0.5)
        run.control.set_replicas("price", 2)
        write_orders(tmp_path / "orders.jsonl", 300, 3000, bad=False)

        def on_two() -> dict:
            assert totals(tmp_path / "run") == expected(0, 3000)
            restarts = [
                e for e in _events(run, "shuffle-partitions") if e["inputs"]["shuffleRule"] == "follow"
            ]
            assert len(restarts) == 1, restarts
            plan = last_plan(run.queries["price"])
            assert plan is not None and set(shuffle_counts(plan)) == {2}, plan
            # ... and runs in both: adaptive execution would coalesce these small batches into one task
            assert "coalesced" not in plan, plan
            return restarts[0]

        restart = eventually(
            on_two, 300, "every order, the later ones joined in two partitions", run=run, poll=0.5
        )
    finally:
        run.stop()
    inputs = restart["inputs"]
    assert inputs["shufflePartitionsBefore"] == 1 and inputs["shufflePartitionsAfter"] == 2
    assert inputs["replicas"] == 2 and inputs["pause_seconds"] is not None
    assert "follow 2 replicas" in restart["reason"]
    assert totals(tmp_path / "run") == expected(0, 3000)  # and nothing doubled since


def test_a_broadcast_join_has_no_shuffle_to_follow_and_is_never_restarted(spark, tmp_path):
    write_skus(tmp_path / "skus")
    write_orders(tmp_path / "orders.jsonl", 0, 300, bad=False)
    run = PipelineRun(spec(tmp_path), tmp_path / "run", spark=spark, trigger_seconds=0.25).start()
    try:
        assert run.control is not None

        def first() -> None:
            assert totals(tmp_path / "run") == expected(0, 300)

        eventually(first, 240, "the first orders", run=run, poll=0.5)
        run.control.set_replicas("price", 2)
        write_orders(tmp_path / "orders.jsonl", 300, 1000, bad=False)

        def verdict() -> None:
            assert totals(tmp_path / "run") == expected(0, 1000)
            rules = [e["inputs"]["shuffleRule"] for e in _events(run, "shuffle-partitions")]
            assert "no-shuffle" in rules, rules

        eventually(
            verdict, 300, "every order, and the verdict that the step does not shuffle", run=run, poll=0.5
        )
    finally:
        run.stop()
    assert all(e["inputs"]["shuffleRule"] != "follow" for e in _events(run, "shuffle-partitions"))
