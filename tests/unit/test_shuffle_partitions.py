"""The rule that makes a stateless step's shuffle partitions follow its replicas
(:mod:`tidal.scaling.shuffle_partitions`), and reading a plan's shuffles
(:func:`tidal.spark.run.shuffle_follower.shuffle_counts`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidal.scaling.shuffle_partitions import (
    COOLDOWN_FLOOR,
    FACTOR,
    PAUSE_MULTIPLE,
    ShuffleLoad,
    decide_shuffle,
)
from tidal.spark.run.shuffle_follower import shuffle_counts

# Spark 4.3's executed plan of a stream joined to a cached table without broadcast (abridged).
SORT_MERGE = """
WriteToDataSourceV2 MicroBatchWrite[epoch: 3, writer: NoopStreamingWrite]
+- AdaptiveSparkPlan isFinalPlan=true
   +- == Final Plan ==
      ResultQueryStage 3
      +- *(4) SortMergeJoin [k#70L], [id#0L], Inner
         :- *(2) Sort [k#70L ASC NULLS FIRST], false, 0
         :  +- AQEShuffleRead coalesced
         :     +- ShuffleQueryStage 0
         :        +- Exchange hashpartitioning(k#70L, 6), ENSURE_REQUIREMENTS, [plan_id=410]
         :           +- *(1) Project [timestamp#68, value#69L, (value#69L % 100) AS k#70L]
         +- *(3) Sort [id#0L ASC NULLS FIRST], false, 0
            +- AQEShuffleRead coalesced
               +- ShuffleQueryStage 2
                  +- Exchange hashpartitioning(id#0L, 6), ENSURE_REQUIREMENTS, [plan_id=424]
"""
BROADCAST = """
+- *(2) BroadcastHashJoin [sku#12], [sku#3], Inner, BuildRight, false
   :- *(2) Project [_id#10, sku#12, qty#13]
   +- BroadcastExchange HashedRelationBroadcastMode(List(input[0, string, true]),false), [plan_id=88]
      +- InMemoryTableScan [sku#3, unit_price#4, region#5]
"""
OWN_COUNT = "+- Exchange RoundRobinPartitioning(8), REPARTITION_BY_NUM, [plan_id=12]"


def test_a_plans_hash_shuffles_are_read_with_their_counts():
    assert shuffle_counts(SORT_MERGE) == [6, 6]
    assert shuffle_counts("+- Exchange rangepartitioning(ts#1 ASC NULLS FIRST, 3), ENSURE_REQUIREMENTS") == [
        3
    ]


def test_a_broadcast_or_a_repartition_with_its_own_count_is_not_a_shuffle_the_setting_splits():
    assert shuffle_counts(BROADCAST) == []
    assert shuffle_counts(OWN_COUNT) == []


def load(**kw) -> ShuffleLoad:
    base = {"partitions": 2, "replicas": 2, "cores": 8, "shuffles": True}
    return ShuffleLoad(**{**base, **kw})


def test_replicas_doubled_restart_the_step_on_their_count():
    decision = decide_shuffle(load(replicas=4), now=0.0)
    assert decision.changed and decision.desired == 4 and decision.rule == "follow"
    assert decision.inputs["replicas"] == 4 and decision.inputs["shufflePartitions"] == 2


def test_the_count_never_exceeds_the_cores_the_run_can_have():
    decision = decide_shuffle(load(replicas=16, cores=4), now=0.0)
    assert decision.desired == 4


def test_no_restart_without_a_shuffle_before_the_first_plan_or_at_zero_replicas():
    assert decide_shuffle(load(replicas=8, shuffles=False), 0.0).rule == "no-shuffle"
    assert decide_shuffle(load(replicas=8, shuffles=None), 0.0).rule == "unplanned"
    assert decide_shuffle(load(replicas=0), 0.0).rule == "idle"


def test_a_small_change_is_not_worth_a_restart():
    decision = decide_shuffle(load(partitions=4, replicas=5), 0.0)
    assert not decision.changed and decision.rule == "within-band"


def test_the_cooldown_grows_with_the_learnt_pause():
    quick = load(replicas=8, last_change_at=100.0, pause=1.0)
    assert decide_shuffle(quick, 100.0 + COOLDOWN_FLOOR - 1).rule == "cooling"
    assert decide_shuffle(quick, 100.0 + COOLDOWN_FLOOR).changed
    slow = load(replicas=8, last_change_at=100.0, pause=10.0)
    assert decide_shuffle(slow, 100.0 + PAUSE_MULTIPLE * 10.0 - 1).rule == "cooling"
    assert decide_shuffle(slow, 100.0 + PAUSE_MULTIPLE * 10.0).changed


@given(
    partitions=st.integers(1, 64),
    replicas=st.integers(0, 64),
    cores=st.integers(1, 64),
    shuffles=st.sampled_from([True, False, None]),
    since=st.one_of(st.none(), st.floats(0, 10_000)),
    pause=st.one_of(st.none(), st.floats(0.1, 60)),
)
def test_a_change_is_bounded_worth_its_restart_and_settles_at_once(
    partitions, replicas, cores, shuffles, since, pause
):
    now = 20_000.0
    last = None if since is None else now - since
    decision = decide_shuffle(
        ShuffleLoad(partitions, replicas, cores, shuffles, last_change_at=last, pause=pause), now
    )
    if not decision.changed:
        assert decision.desired == partitions
        return
    assert shuffles is True and replicas > 0
    assert 1 <= decision.desired <= cores and decision.desired == min(replicas, cores)
    assert max(decision.desired, partitions) / min(decision.desired, partitions) >= FACTOR
    # One restart settles it: on the new count, with the replicas unchanged, nothing more to do.
    again = ShuffleLoad(decision.desired, replicas, cores, True, last_change_at=None, pause=pause)
    assert not decide_shuffle(again, now).changed


class _Run:
    """What the follower reads of a run, on a real control store and checkpoint directories."""

    def __init__(self, tmp_path) -> None:
        from tidal.isb.control import ControlStore

        self.run_dir = tmp_path
        self.control = ControlStore(tmp_path / "pipeline.db", "sync")
        self.queries: dict = {}

    def cores_allowed(self) -> tuple[int, str]:
        return 8, "master local[8]"


def _checkpoint(run_dir, planned: int, committed: int) -> None:
    for log, last in (("offsets", planned), ("commits", committed)):
        (run_dir / "checkpoints" / "price" / log).mkdir(parents=True, exist_ok=True)
        for batch in range(last + 1):
            (run_dir / "checkpoints" / "price" / log / str(batch)).write_text("v1\n")


def _follower(run, replicas: int):
    from tidal.controller import EventLog
    from tidal.spark.run.shuffle_follower import ShuffleFollower

    return ShuffleFollower(
        run, ["price"], EventLog(run.run_dir / "events.jsonl"), replicas=lambda _: replicas
    )


def test_a_driver_starts_a_step_on_its_replicas_count_and_keeps_it(tmp_path):
    run = _Run(tmp_path)
    _checkpoint(tmp_path, planned=4, committed=4)
    assert _follower(run, replicas=3).count("price") == 3
    assert _follower(run, replicas=12).count("price") == 8  # at most the cores


def test_a_batch_a_crash_cut_short_replays_on_the_count_it_was_planned_with(tmp_path):
    """Its writer tasks key their appends by task: on another count its rows would go to other
    tasks than their first attempt's, and some would be written twice, others never."""
    run = _Run(tmp_path)
    _checkpoint(tmp_path, planned=4, committed=4)
    assert _follower(run, replicas=2).count("price") == 2
    _checkpoint(tmp_path, planned=5, committed=4)  # the driver died inside batch 5
    assert _follower(run, replicas=6).count("price") == 2
