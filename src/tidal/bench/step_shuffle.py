"""Benchmark (#60 part 3): what a shuffling step gains when its shuffle partitions follow its
replicas.

The pipeline: ``ORDERS`` JSON orders in a file → a DataFrame step
(:func:`~tidal.examples.udfs.lookup_by_order`: repartition by order id, then a Python lookup of
5 ms a record, the work after the shuffle) at ``REPLICAS`` replicas → a file sink, on
``local[4]`` (the lookup waits, so four tasks run side by side on two cores). Two jobs,
alternating, ``rounds`` each:

- **follow**: what Tidal does now: the step's shuffle runs in its replicas' count, 4, with
  adaptive execution's coalescing off (:mod:`tidal.spark.run.shuffle_follower`);
- **session**: what it did before: the session's 2 shuffle partitions, coalescing on.

Reported: messages/s delivered from the first delivery to the last (the start-up left out),
medians. Run: ``tidal bench step-shuffle``.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, write_result

__all__ = ["main", "run_job"]

ORDERS = 12_000
REPLICAS = 4
MASTER = "local[4]"
DEADLINE = 900.0


def _spec(orders: Path) -> Any:
    from tidal.spec import parse_pipeline

    return parse_pipeline({
        "name": "lookups",
        "limits": {"readBatchSize": 1000},
        "vertices": [
            {"name": "in", "source": {"user": {"class": "tidal.examples.sources:LinesSource",
                                               "options": {"path": str(orders)}}},
             "scale": {"disabled": True}},
            {"name": "lookup", "udf": {"dataframe": "tidal.examples.udfs:lookup_by_order"},
             "scale": {"disabled": True}, "replicas": REPLICAS},
            {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
        ],
        "edges": [
            {"from": "in", "to": "lookup", "records": {"schema": "order_id STRING NOT NULL"}},
            {"from": "lookup", "to": "out"},
        ],
    })  # fmt: skip


@contextlib.contextmanager
def _as_before() -> Iterator[None]:
    """The step's query as before the follower: the session's shuffle count, coalescing on."""
    from tidal.spark.run.shuffle_follower import ShuffleFollower

    count, conf = ShuffleFollower.count, ShuffleFollower.conf
    ShuffleFollower.count = lambda self, step: 2  # type: ignore[method-assign]
    ShuffleFollower.conf = {}
    try:
        yield
    finally:
        ShuffleFollower.count = count  # type: ignore[method-assign]
        ShuffleFollower.conf = conf


def run_job(job: str, root: Path) -> dict[str, Any]:
    from tidal.spark.run.pipeline import PipelineRun
    from tidal.spark.run.shuffle_follower import last_plan, shuffle_counts
    from tidal.spark.sinks.files import read_file_sink

    work = Path(tempfile.mkdtemp(prefix=f"{job}-", dir=root))
    orders = work / "orders.jsonl"
    orders.write_text("".join(json.dumps({"order_id": f"o{i}"}) + "\n" for i in range(ORDERS)))
    out = work / "run" / "out.jsonl"
    as_before = _as_before() if job == "session" else contextlib.nullcontext()
    with as_before, PipelineRun(_spec(orders), work / "run", master=MASTER) as run:
        began = time.monotonic()
        first: tuple[float, int] | None = None
        while (delivered := len(read_file_sink(out))) < ORDERS:
            run.check()
            if first is None and delivered:
                first = (time.monotonic(), delivered)
            if time.monotonic() - began > DEADLINE:
                raise RuntimeError(f"step-shuffle {job}: {delivered} of {ORDERS} delivered; see {work}")
            time.sleep(0.2)
        ended = time.monotonic()
        plan = last_plan(run.queries["lookup"]) or ""
    assert first is not None
    return {
        "job": job,
        "per_s": round((ORDERS - first[1]) / (ended - first[0]), 1),
        "shuffle_partitions": sorted(set(shuffle_counts(plan))),
        "coalesced": "coalesced" in plan,
        "delivered": len(read_file_sink(out)),
    }


def main(out: Path = RESULTS, rounds: int = 3) -> int:
    root = Path(tempfile.mkdtemp(prefix="tidal-bench-step-shuffle-"))
    rows = []
    for round_ in range(1, rounds + 1):
        for job in ("session", "follow"):
            rows.append({**run_job(job, root), "round": round_})
            r = rows[-1]
            print(f"  round {round_} {job}: {r['per_s']} msg/s (shuffle {r['shuffle_partitions']}, "
                  f"coalesced {r['coalesced']}, {r['delivered']} delivered)", flush=True)  # fmt: skip
    med = {
        job: statistics.median(r["per_s"] for r in rows if r["job"] == job) for job in ("session", "follow")
    }
    print()
    print("| job | msg/s (median; rounds) | × session |")
    print("|---|---|---|")
    for job in ("session", "follow"):
        each = " / ".join(str(r["per_s"]) for r in rows if r["job"] == job)
        print(f"| {job} | {med[job]:,.0f} ({each}) | {med[job] / med['session']:.2f}× |")
    path = write_result("step-shuffle", {"orders": ORDERS, "rows": rows}, out)
    print(f"wrote {path}")
    return 0 if all(r["delivered"] == ORDERS for r in rows) else 1
