"""SQL and DataFrame steps on real Spark (issue #23): JSON orders with a schema → a SQL step that
filters, computes and joins a Parquet reference table → a file sink; bad records in the dead
letter with their reason; replicas change the step's task count; a SIGKILL'd run resumes
exactly once; the reference table is read again on its interval; every check Spark makes at
start names the field and the fix."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import TypeVar

import pytest

from tidal import errors
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import parse_pipeline

from .waits import eventually, wait_for

pytestmark = pytest.mark.spark

T = TypeVar("T")

SCHEMA = "order_id STRING NOT NULL, sku STRING, qty INT"
SQL = (
    "SELECT _id, o.order_id, o.qty * s.unit_price AS total, s.region "
    "FROM input o JOIN skus s ON o.sku = s.sku WHERE o.qty > 0"
)
BAD = {
    "not json": "not valid JSON",
    "[1, 2]": "not a JSON object",
    '{"order_id": "x", "sku": "a", "qty": "many"}': "a field does not match the schema",
    '{"sku": "a", "qty": 1}': "field order_id is missing or null (declared NOT NULL)",
}


def write_skus(path: Path, prices: tuple[float, float] = (1.5, 2.0)) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.parquet"):
        old.unlink()
    table = pa.table({"sku": ["a", "b"], "unit_price": list(prices), "region": ["eu", "us"]})
    pq.write_table(table, path / f"skus-{time.time_ns()}.parquet")


def order(i: int) -> dict:
    return {"order_id": f"o{i}", "sku": "ab"[i % 2], "qty": i % 4}


def write_orders(path: Path, first: int, last: int, *, bad: bool = True) -> None:
    """Orders ``first..last-1`` (one line each) appended to ``path``, the bad records after the first ones."""
    rows = [json.dumps(order(i)) for i in range(first, last)]
    if bad:
        rows[3:3] = list(BAD)
    with path.open("a") as f:
        f.write("".join(row + "\n" for row in rows))


def spec(tmp_path: Path, *, sql: str = SQL, schema: str = SCHEMA, refresh: float = 0.0, replicas: int = 1,
         batch: int = 250, **udf) -> object:  # fmt: skip
    step = udf or {
        "sql": sql,
        "reference": {"skus": {"path": str(tmp_path / "skus"), "refreshSeconds": refresh}},
    }
    return parse_pipeline(
        {
            "name": "orders",
            "limits": {"readBatchSize": batch},
            "vertices": [
                {
                    "name": "in",
                    "source": {
                        "user": {
                            "class": "tidal.examples.sources:LinesSource",
                            "options": {"path": str(tmp_path / "orders.jsonl")},
                        }
                    },
                    "scale": {"disabled": True},
                },
                {
                    "name": "price",
                    "udf": {**step, "deadLetter": {"file": {"path": "dead.jsonl"}}},
                    "scale": {"disabled": True},
                    "replicas": replicas,
                },
                {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
            ],
            "edges": [
                {"from": "in", "to": "price", "records": {"schema": schema}},
                {"from": "price", "to": "out"},
            ],
        }
    )


def delivered(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    out: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        assert record["id"] not in out, f"{record['id']} delivered twice"
        out[record["id"]] = record
    return out


def count(tmp_path: Path) -> int:
    return len(delivered(tmp_path / "run" / "out.jsonl"))


def expected(first: int, last: int, prices=(1.5, 2.0)) -> dict[str, float]:
    """order_id → total for the orders that pass the SQL's filter."""
    price = {"a": prices[0], "b": prices[1]}
    return {
        f"o{i}": order(i)["qty"] * price[order(i)["sku"]] for i in range(first, last) if order(i)["qty"] > 0
    }


def dead_lettered(run_dir: Path) -> dict[str, dict]:
    """The dead letter's records, once they are all there (each bad record once)."""
    dead = delivered(run_dir / "dead.jsonl")
    assert sorted(d["payload"] for d in dead.values()) == sorted(BAD)
    return dead


def totals(run_dir: Path) -> dict[str, float]:
    found: dict[str, float] = {}
    for record in delivered(run_dir / "out.jsonl").values():
        row = json.loads(record["payload"])
        assert row["order_id"] not in found
        found[row["order_id"]] = row["total"]
    return found


def test_sql_step_filters_computes_joins_and_dead_letters_each_bad_record_with_its_reason(spark, tmp_path):
    write_skus(tmp_path / "skus")
    write_orders(tmp_path / "orders.jsonl", 0, 2000)
    want = expected(0, 2000)

    def priced() -> None:
        """The orders and the dead letter: both are waited for, not the orders alone (#54)."""
        assert totals(tmp_path / "run") == want  # every valid order once, with its computed total
        rows = [json.loads(r["payload"]) for r in delivered(tmp_path / "run/out.jsonl").values()]
        assert {row["region"] for row in rows} == {"eu", "us"}
        assert all(r_id.startswith("price:in:") for r_id in delivered(tmp_path / "run/out.jsonl"))
        for d in dead_lettered(tmp_path / "run").values():
            assert d["error"].startswith(BAD[d["payload"]]), d

    run = PipelineRun(spec(tmp_path), tmp_path / "run", spark=spark, trigger_seconds=0.25).start()
    try:
        eventually(priced, 300, "every order priced and every bad one dead-lettered", run=run, poll=0.5)
        time.sleep(1)  # anything doubled would show up now
    finally:
        run.stop()
    priced()  # and nothing doubled since


def test_replicas_are_the_steps_read_partitions(spark, tmp_path):
    write_skus(tmp_path / "skus")
    write_orders(tmp_path / "orders.jsonl", 0, 200, bad=False)
    run = PipelineRun(spec(tmp_path), tmp_path / "run", spark=spark, trigger_seconds=0.25).start()
    try:
        assert run.control is not None
        control = run.control

        def first_orders() -> None:
            """Delivered, and price's batches recorded: a batch is recorded after its sink's commit,
            and ``one`` and ``before`` are read from the record (#54)."""
            assert count(tmp_path) >= len(expected(0, 200)), count(tmp_path)
            assert control.processed("price") >= 200, control.processed("price")

        eventually(first_orders, 240, "the first orders", run=run, poll=0.5)
        one = [b.tasks for b in control.batches("price") if b.rows]
        before = max(b.batch_id for b in control.batches("price"))
        control.set_replicas("price", 4)
        write_orders(tmp_path / "orders.jsonl", 200, 6000, bad=False)

        def on_four() -> list[int]:
            assert totals(tmp_path / "run") == expected(0, 6000)
            # (a batch planned before the change may still have run with one task)
            four = [b.tasks for b in control.batches("price") if b.batch_id > before + 1 and b.rows >= 4]
            assert four and set(four) == {4}, four
            return four

        four = eventually(on_four, 300, "every order, priced on four tasks", run=run, poll=0.5)
    finally:
        run.stop()
    assert set(one) == {1}
    assert four and set(four) == {4}, four
    assert totals(tmp_path / "run") == expected(0, 6000)


def test_reference_table_is_read_again_on_its_interval(spark, tmp_path, monkeypatch):
    from tidal.spark.query.frames import ReferenceRefresher

    refreshed: list[float] = []  # when each refresh that finished had begun (monotonic)
    refresh = ReferenceRefresher.refresh

    def noted(self: ReferenceRefresher) -> None:
        begun = time.monotonic()
        refresh(self)
        refreshed.append(begun)

    # Only watched: the refresher still reads the table on its own interval.
    monkeypatch.setattr(ReferenceRefresher, "refresh", noted)
    write_skus(tmp_path / "skus")
    write_orders(tmp_path / "orders.jsonl", 0, 100, bad=False)
    want = {**expected(0, 100), **expected(100, 200, prices=(10.0, 20.0))}
    run = PipelineRun(spec(tmp_path, refresh=1), tmp_path / "run", spark=spark, trigger_seconds=0.25).start()
    try:

        def first_orders() -> None:
            assert totals(tmp_path / "run") == expected(0, 100)

        eventually(first_orders, 240, "the first orders at the first prices", run=run, poll=0.5)
        write_skus(tmp_path / "skus", prices=(10.0, 20.0))
        written = time.monotonic()

        def read_again() -> None:
            """Past the refresh interval: a refresh begun after the write has cached the new prices
            (a refresh is a Spark job: on a busy box a fixed sleep may end before one did, #54)."""
            assert any(t >= written for t in refreshed), f"{len(refreshed)} refreshes, none since the write"

        eventually(read_again, 120, "the reference table read again", run=run, poll=0.5)
        write_orders(tmp_path / "orders.jsonl", 100, 200, bad=False)

        def every_order() -> None:
            assert totals(tmp_path / "run") == want

        eventually(every_order, 240, "every order, the later ones at the new prices", run=run, poll=0.5)
    finally:
        run.stop()
    assert totals(tmp_path / "run") == want  # and nothing doubled since


def test_dataframe_step_runs_the_users_function(spark, tmp_path):
    lines = [json.dumps({"order": i, "qty": i % 5, "price": 2.5}) for i in range(500)]
    (tmp_path / "orders.jsonl").write_text("\n".join(lines) + "\n")
    pipeline = spec(tmp_path, schema="order INT NOT NULL, qty INT, price DOUBLE",
                    dataframe="tidal.examples.udfs:large_orders")  # fmt: skip
    run = PipelineRun(pipeline, tmp_path / "run", spark=spark, trigger_seconds=0.25).start()
    want = {i: (i % 5) * 2.5 for i in range(500) if i % 5 >= 3}

    def large_orders() -> None:
        rows = [json.loads(r["payload"]) for r in delivered(tmp_path / "run/out.jsonl").values()]
        assert {row["order"]: row["total"] for row in rows} == want

    try:
        eventually(large_orders, 240, "every large order", run=run, poll=0.5)
    finally:
        run.stop()
    large_orders()  # and nothing doubled since


@pytest.mark.long
def test_a_sigkilled_run_resumes_exactly_once(tmp_path):
    from .test_cli import tidal

    write_skus(tmp_path / "skus")
    write_orders(tmp_path / "orders.jsonl", 0, 6_000)
    # Batches of 1,000: the kill still comes mid-run (after the first 500), with fewer joins to wait for.
    text = json.dumps(spec(tmp_path, batch=1000).model_dump(by_alias=True, exclude_none=True))
    (tmp_path / "orders.json").write_text(text)
    args = (
        "run",
        str(tmp_path / "orders.json"),
        "--run-dir",
        str(tmp_path / "run"),
        "--no-metrics",
        "--no-live",
    )
    first = tidal(*args, start_new_session=True)
    try:
        wait_for(lambda: count(tmp_path) >= 500, 180, "the first orders", first)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
    assert count(tmp_path) < len(expected(0, 6_000)), "finished before the kill"
    second = tidal(*args, start_new_session=True)

    def every_order_once() -> None:
        """The orders and the dead letter, each written on its own: both are waited for (#54)."""
        assert totals(tmp_path / "run") == expected(0, 6_000)
        dead_lettered(tmp_path / "run")

    try:
        eventually(every_order_once, 300, "every order and every bad record", proc=second, poll=1)
        time.sleep(2)  # anything doubled would show up now
    finally:
        second.send_signal(signal.SIGTERM)
        second.communicate(timeout=120)
    every_order_once()  # and nothing doubled since


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"schema": "order_id STRNG"}, "records.schema", "not a Spark DDL schema"),
        ({"sql": "SELEC id FROM input"}, "udf.sql", "does not parse"),
        ({"sql": "SELECT _id FROM orders_table"}, "udf.sql", "orders_table"),
        ({"sql": "SELECT order_id FROM input"}, "udf.sql", "no _id column"),
        (
            {"sql": "SELECT sku AS _id, count(*) AS n FROM input GROUP BY sku"},
            "udf.sql",
            "stateful (an aggregation)",
        ),
        ({"sql": "SELECT DISTINCT _id, sku FROM input"}, "udf.sql", "stateful"),
        ({"sql": "SELECT _id FROM input ORDER BY qty"}, "udf.sql", "stateful (ORDER BY)"),
        (
            {"sql": "SELECT a._id FROM input a JOIN input b ON a.sku = b.sku"},
            "udf.sql",
            "join of the input with itself",
        ),
        ({"dataframe": "tidal.examples.udfs:upper"}, "udf.dataframe", "raised"),
        ({"schema": "_id STRING, qty INT"}, "records.schema", "leave _id out of it"),
    ],
)
def test_what_spark_checks_at_start_names_the_field_and_the_fix(spark, tmp_path, change, path, words):
    write_skus(tmp_path / "skus")
    write_orders(tmp_path / "orders.jsonl", 0, 10, bad=False)
    schema = change.pop("schema", SCHEMA)
    udf = {} if "sql" in change else change
    pipeline = spec(tmp_path, schema=schema, sql=change.get("sql", SQL), **udf)
    run = PipelineRun(pipeline, tmp_path / "run", spark=spark, trigger_seconds=0.25)
    with pytest.raises(errors.SpecError) as caught:
        try:
            run.start()
        finally:
            run.stop()
    message = str(caught.value)
    assert path in message and words in message, message
    assert not run.queries  # refused before any query started
    assert not (tmp_path / "run" / "out.jsonl").exists()
