"""The Kafka source against a Kafka-protocol broker (librdkafka's mock cluster, see kafka_broker.py)."""

from __future__ import annotations

import json
import time
from typing import Any, TypeVar

import pytest

from tidal.isb.control import ControlStore
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import parse_pipeline
from tidal.testing import delivered, ids_of, run_pipeline

from .kafka_broker import MockKafka
from .waits import eventually, wait_for
from .zero_wake import SCALE_TO_ZERO, idles_to_zero_then_wakes

T = TypeVar("T")

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def kafka():
    return MockKafka()


def spec(
    kafka: MockKafka,
    topic: str,
    *,
    sink: dict | None = None,
    scale: dict | None = None,
    replicas: int = 3,
    policy: str | None = None,
):
    return parse_pipeline(
        {
            "name": "k",
            **({"policy": policy} if policy else {}),
            "limits": {"readBatchSize": 300},
            "controller": {"intervalSeconds": 0.5},
            "vertices": [
                {
                    "name": "in",
                    "source": {
                        "kafka": {"bootstrapServers": kafka.bootstrap, "topic": topic, "groupId": "tidal"}
                    },
                    "scale": scale or {"disabled": True},
                    "replicas": replicas,
                },
                {"name": "work", "udf": {"map": "tidal.examples.udfs:upper"}, "scale": {"disabled": True}},
                {"name": "out", "sink": sink or {"file": {"path": "out.jsonl"}}, "scale": {"disabled": True}},
            ],
            "edges": [{"from": "in", "to": "work"}, {"from": "work", "to": "out"}],
        }
    )


def test_every_record_arrives_once_with_ids_from_topic_partition_offset_and_the_group_commits(
    spark, kafka, run_dir
):
    values = [json.dumps({"n": i}).encode() for i in range(5000)]
    kafka.produce("orders", values)

    def arrived_once(control: ControlStore) -> None:
        """Every record once, the group's offsets at the topic's ends, and no lag left. The lag is
        reported when the source plans a batch, so its 0 comes with the trigger after the last
        batch, which may be after the sink wrote the last record (#54)."""
        ids = ids_of(delivered(run_dir / "out.jsonl"))
        assert len(ids) == len(set(ids)) == 5000, (len(ids), len(set(ids)))
        ends = kafka.ends("orders")
        assert set(ids) == {f"work:in:orders/{p}/{o}" for p, end in ends.items() for o in range(end)}
        payloads = {json.loads(r["payload"].lower())["n"] for r in delivered(run_dir / "out.jsonl")}
        assert payloads == set(range(5000))  # upper() then lower(): every value, once
        assert kafka.committed("orders", "tidal") == ends  # what kafka-consumer-groups would show
        tasks = [b.tasks for b in control.batches("in") if b.rows]
        assert max(tasks) == 3  # three replicas → three tasks, from four partitions' ranges
        report = control.source_report("in")
        assert report is not None and report.pending == 0.0 and report.error == "", report

    with PipelineRun(spec(kafka, "orders"), run_dir, spark=spark, trigger_seconds=0.2) as run:
        assert run.control is not None
        control = run.control
        eventually(lambda: arrived_once(control), 300, "every record, once", run=run, poll=1)
    arrived_once(ControlStore(run_dir / "pipeline.db"))  # and nothing doubled since


ORDERS = """
name: shop
limits: {{readBatchSize: 400}}
controller: {{intervalSeconds: 0.5}}
vertices:
  - name: in
    source:
      kafka: {{bootstrapServers: "{bootstrap}", topic: shop, groupId: shop-tidal}}
    scale: {{disabled: true}}
    replicas: 2
  - name: total
    udf:
      map: tidal.examples.udfs:order_total
      retries: 0
      deadLetter: {{file: {{path: dead.jsonl}}}}
    scale: {{disabled: true}}
  - name: pq
    sink: {{parquet: {{path: orders-pq, partitionBy: [region]}}}}
    scale: {{disabled: true}}
  - name: dl
    sink: {{delta: {{path: orders-delta}}}}
    scale: {{disabled: true}}
edges:
  - {{from: in, to: total}}
  - {{from: total, to: pq}}
  - {{from: total, to: dl}}
"""


def parquet_ids(path) -> list[str]:
    import pyarrow.parquet as pq

    from tidal.spark.sinks.tables import committed_files

    files = committed_files(path)
    return pq.read_table(files).column("id").to_pylist() if files else []


def delta_ids(path) -> list[str]:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(str(path)).to_pyarrow_dataset().to_table(columns=["id"]).column("id").to_pylist()
    except TableNotFoundError:
        return []


ORDER_COUNT = 12_000  # enough that the first run is still going when it is killed at 1,200


@pytest.mark.long
def test_kafka_to_parquet_and_delta_exactly_once_through_a_driver_sigkill_and_bad_records_to_the_dead_letter(
    tmp_path, kafka
):
    import os
    import signal

    import pyarrow.parquet as pq

    from tidal.spark.sinks.tables import committed_files

    from .test_cli import tidal

    good = [
        json.dumps({"order": i, "qty": i % 5 + 1, "price": 2.5, "region": ("eu", "us")[i % 2]}).encode()
        for i in range(ORDER_COUNT)
    ]
    bad = [b"not json at all", b'{"order": "no price"}', b"[1, 2]"] * 10
    values = good[:3000] + bad + good[3000:]
    kafka.produce("shop", values)
    spec = tmp_path / "shop.yaml"
    spec.write_text(ORDERS.format(bootstrap=kafka.bootstrap))
    run_dir = tmp_path / "run"
    args = ("run", str(spec), "--run-dir", str(run_dir), "--no-metrics", "--no-live")
    first = tidal(*args, start_new_session=True)
    try:
        wait_for(lambda: len(parquet_ids(run_dir / "orders-pq")) >= 1200, 180, "the first orders", first)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
    killed_at = len(parquet_ids(run_dir / "orders-pq"))
    assert killed_at < ORDER_COUNT, "finished before the kill; the test proves nothing"
    second = tidal(*args, start_new_session=True)

    def every_order_once() -> None:
        """Both tables, the dead letter and the group's offsets: each is written on its own, so
        the wait covers all of them, not the tables alone (#54)."""
        for ids in (parquet_ids(run_dir / "orders-pq"), delta_ids(run_dir / "orders-delta")):
            assert len(ids) == len(set(ids)) == ORDER_COUNT, (len(ids), len(set(ids)))
            assert all(i.startswith("total:in:shop/") for i in ids)
        table = pq.read_table(committed_files(run_dir / "orders-pq"))
        assert set(table.column_names) >= {"id", "order", "qty", "price", "total"}
        assert sorted(table.column("order").to_pylist()) == list(range(ORDER_COUNT))
        dead = delivered(run_dir / "dead.jsonl")
        assert len(dead) == 30 and all(d["id"].startswith("in:shop/") for d in dead), len(dead)
        assert all(
            "not an order" in d["error"] or "JSONDecodeError" in d["error"] or "Expecting" in d["error"]
            for d in dead
        )
        assert kafka.committed("shop", "shop-tidal") == kafka.ends("shop")

    try:
        eventually(every_order_once, 300, "every order in both tables", proc=second, poll=2)
        time.sleep(2)  # anything doubled would show up now
    finally:
        second.send_signal(signal.SIGTERM)
        out, _ = second.communicate(timeout=120)
    every_order_once()  # and nothing doubled since
    assert "resumed from its checkpoints" in out


def test_a_kafka_source_at_zero_wakes_on_its_first_record_not_a_peek(spark, kafka, run_dir):
    """Idled to 0 under `tidal`, its query still asks the broker for the lag at every trigger:
    a record produced at 0 wakes it at once (:mod:`.zero_wake`), and every record is read once."""
    kafka.produce("wake", [b"first %d" % i for i in range(200)])
    pipeline = spec(kafka, "wake", sink={"blackhole": {}}, scale=SCALE_TO_ZERO, replicas=1)
    assert pipeline.policy_of("in") == "tidal"

    def more() -> int:
        kafka.produce("wake", [b"second %d" % i for i in range(300)])
        return 300

    with PipelineRun(pipeline, run_dir, spark=spark, trigger_seconds=0.2) as run:
        idles_to_zero_then_wakes(run, run_dir, "in", 200, more)
    assert kafka.committed("wake", "tidal") == kafka.ends("wake")


@pytest.mark.long
def test_lag_scales_the_source_up_by_numaflows_formula_and_down_and_a_broker_gone_leaves_it_alone(
    spark, run_dir
):
    from tidal.controller.events import EventLog

    broker = MockKafka()  # its own: this test stops it
    broker.produce("clicks", [b"click %d" % i for i in range(30_000)])
    scale = {"min": 1, "max": 4, "lookbackSeconds": 3, "targetProcessingSeconds": 1}
    scale |= {"scaleUpCooldownSeconds": 1, "scaleDownCooldownSeconds": 2}
    pipeline = spec(broker, "clicks", sink={"blackhole": {}}, scale=scale, replicas=1, policy="numaflow")
    events = EventLog(run_dir / "events.jsonl")

    def source_events() -> list:
        return [e for e in events.read() if e.vertex == "in"]

    def scaled_down() -> None:
        assert any(e.changed and e.desired < e.current for e in source_events()), [
            str(e.rule) for e in source_events()
        ]

    run = PipelineRun(pipeline, run_dir, spark=spark, trigger_seconds=0.2)
    with run:
        eventually(scaled_down, 240, "the source scaled down", run=run, poll=0.5)
        # A scale-down comes once the lag is small, not necessarily gone: the last batches may
        # still be on their way (#54). Every record is read before the broker goes.
        assert run.control is not None
        control = run.control

        def everything_read() -> None:
            assert control.processed("in") == 30_000, control.processed("in")

        eventually(everything_read, 120, "every record read", run=run, poll=0.5)
        broker.stop()

        def unavailable() -> None:  # the pipeline keeps running meanwhile (run.check)
            report = control.source_report("in")
            held = any(str(e.rule) == "metrics-unavailable" for e in source_events())
            assert held, "the source was not held as lag not available"
            assert report is not None and report.pending is None and "not available" in report.error, report

        eventually(unavailable, 120, "the lag reported as not available", run=run, poll=0.5)
        time.sleep(2)
        run.check()
    ups = [e for e in source_events() if e.changed and e.desired > e.current]
    assert ups, [str(e.rule) for e in source_events()]
    first = ups[0]
    assert str(first.rule) == "scale-up" and "avg pending" in first.reason  # the lag, over the rate
    inputs = dict(first.inputs)
    assert inputs["pending"] > 0 and inputs["rate"] > 0


def test_a_range_the_broker_no_longer_holds_fails_the_task_naming_the_data_loss(kafka):
    from confluent_kafka import TopicPartition

    from tidal.errors import SourceError
    from tidal.spark.batch.config import QueryConfig
    from tidal.spark.sources.kafka import read_range

    kafka.produce("short", [b"x" * 100] * 120_000, partitions=1)  # past the mock broker's retention
    low = kafka.consumer().get_watermark_offsets(TopicPartition("short", 0), timeout=10)[0]
    assert low > 0, "the broker kept everything: the test proves nothing"
    source = spec(kafka, "short").vertices[0].source
    config = QueryConfig("k", "in", "", "", None, source=source)
    with pytest.raises(
        SourceError, match=r"partition 0: offsets 0\.\.9 are no longer on the broker .*data loss"
    ):
        read_range(config, 0, 0, 9)
    assert len(read_range(config, 0, low, low + 9)) == 10  # what it holds is read


def test_the_kafka_sink_delivers_every_message_keyed_with_its_id_in_a_header(spark, kafka, run_dir):
    pipeline = parse_pipeline(
        {
            "name": "ks",
            "limits": {"readBatchSize": 500},
            "vertices": [
                {"name": "gen", "source": {"generator": {"rate": 2000, "maxMessages": 3000, "msgSize": 40}},
                 "scale": {"disabled": True}},
                {"name": "out", "replicas": 2, "scale": {"disabled": True},
                 "sink": {"kafka": {"bootstrapServers": kafka.bootstrap, "topic": "enriched"}}},
            ],
            "edges": [{"from": "gen", "to": "out"}],
        }
    )  # fmt: skip
    run_pipeline(
        pipeline, run_dir, spark=spark, until=lambda r: r.control.processed("out") >= 3000, timeout=240
    )  # a sink's batch counts once the broker acknowledged every record of it
    consumer = kafka.consumer("check")
    from confluent_kafka import TopicPartition

    ends = kafka.ends("enriched")
    consumer.assign([TopicPartition("enriched", p, 0) for p in ends])
    want = {f"gen:{n}" for n in range(1, 3001)}
    read: list[Any] = []  # every record, duplicates included

    def every_record_read() -> None:
        """Reads on until every record of the topic was read (copies included: each is checked)."""
        read.extend(consumer.consume(1000, timeout=1))
        assert len(read) >= sum(ends.values()), f"{len(read)} of {sum(ends.values())} records read"

    try:
        eventually(every_record_read, 120, "every record read back from the topic", poll=0)
    finally:
        consumer.close()
    seen: dict[str, bytes] = {}
    for message in read:
        assert message.error() is None
        headers = dict(message.headers())
        assert message.key().decode() == headers["tidal-id"].decode()  # keyed by the message id
        seen[headers["tidal-id"].decode()] = message.value()
    assert set(seen) == want  # every message (at least once)
    assert seen["gen:7"].startswith(b"gen 000000000007")
