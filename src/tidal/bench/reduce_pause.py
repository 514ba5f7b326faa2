"""Benchmark (#60 part 4, the pause goals): what one move of a reduce vertex's state costs when
the state is large: 100,000 and 1,000,000 keys.

The pipeline: the generator (a burst at ``RATE``/s until ``keys`` messages are out, then
``TRICKLE``/s so the vertex keeps receiving: a move ends at the restarted query's first batch)
→ a map keying each message by its own number (a key per message) → a keyed reduce
(:class:`~tidal.examples.numaflow.ReduceCounter`) on fixed windows of a day, so nothing closes
and the state holds every key → a file sink. ``local[4]``, 2 state partitions at the start.

Once Spark's progress of the reduce query counts at least ``keys`` rows in its state store
(``stateOperators[0].numRowsTotal``), the run's own move (:meth:`PipelineRun.move_partitions`,
the path ``tidal scale --partitions`` takes) goes 2 → 4 and then 4 → 2. Reported per move: the
pause (from the stop to the first batch after the restart, the move's own measure), the part of
it in Spark's repartition, and the state rows and bytes at the move. The issue's goals: ≤ 10 s
on 100 k keys, ≤ 30 s on 1 M keys, on this box. Run: ``tidal bench reduce-pause``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, write_result

__all__ = ["SIZES", "main", "run_size"]

SIZES = (100_000, 1_000_000)
RATE, TRICKLE = 30_000, 50  # messages/s: the burst that fills the state, then what keeps it moving
MASTER = "local[4]"
MOVES = (4, 2)  # the counts moved to, in turn, from 2
BUILD_SECONDS = 1_800.0  # at most this long to fill the state

PIPELINE = """
name: pause
limits: {{readBatchSize: 20000}}
controller: {{intervalSeconds: 1}}
vertices:
  - name: gen
    source:
      generator: {{rate: {trickle}, shape: bursty, peak: {rate}, at: 0, duration: {burst}, period: 1000000000,
                  msgSize: 30}}
    scale: {{disabled: true}}
  - name: key
    udf: {{pynumaflow: "tidal.examples.numaflow:by_number"}}
  - name: count
    udf:
      reduce: "tidal.examples.numaflow:ReduceCounter"
      reduceArgs: [0]
      groupBy: {{window: {{fixed: {{length: 86400s}}}}, keyed: true}}
    partitions: 2
  - name: out
    sink: {{file: {{path: out.jsonl}}}}
edges:
  - {{from: gen, to: key, chain: false}}
  - {{from: key, to: count}}
  - {{from: count, to: out}}
"""


def state_of(query: Any) -> tuple[int, int]:
    """The rows and bytes in the query's state store, from Spark's last progress (0, 0 before any)."""
    progress = query.lastProgress or {}
    operators = progress.get("stateOperators") or []
    if not operators:
        return 0, 0
    return int(operators[0].get("numRowsTotal", 0)), int(operators[0].get("memoryUsedBytes", 0))


def run_size(keys: int, root: Path) -> dict[str, Any]:
    """Fill a reduce vertex's state with ``keys`` keys, then move it 2 → 4 → 2; each move's cost."""
    from tidal.spark.run.pipeline import PipelineRun
    from tidal.spec.validate import load_pipeline

    work = root / f"keys-{keys}"
    work.mkdir(parents=True)
    spec_path = work / "pause.yaml"
    spec_path.write_text(PIPELINE.format(rate=RATE, trickle=TRICKLE, burst=keys / RATE))
    spec = load_pipeline(spec_path)
    run_dir = work / "run"
    rows: list[dict[str, Any]] = []
    with PipelineRun(spec, run_dir, master=MASTER) as run:
        began = time.monotonic()
        while state_of(run.queries["count"])[0] < keys:
            run.check()
            if time.monotonic() - began > BUILD_SECONDS:
                raise RuntimeError(f"reduce-pause: the state did not reach {keys} keys; see {work}")
            time.sleep(1.0)
        filled = time.monotonic() - began
        for partitions in MOVES:
            state_rows, state_bytes = state_of(run.queries["count"])
            move = run.move_partitions("count", partitions, "tidal bench reduce-pause")
            if not move.ok:
                raise RuntimeError(f"reduce-pause: the move to {partitions} failed: {move.reason}")
            rows.append({
                "keys": keys,
                "from": move.before,
                "to": move.after,
                "state_rows": state_rows,
                "state_mb": round(state_bytes / 1e6, 1),
                "pause_s": round(move.pause or 0.0, 2),
                "repartition_s": round(move.repartition_seconds, 2),
                "stop_s": round(move.stop_seconds, 2),
                "fill_s": round(filled, 1),
            })  # fmt: skip
            row = rows[-1]
            print(f"  {keys:,} keys: {move.before} → {move.after} paused {row['pause_s']} s "
                  f"(stop {row['stop_s']} s, repartition {row['repartition_s']} s; {state_rows:,} rows)",
                  flush=True)  # fmt: skip
    return {"keys": keys, "moves": rows}


def main(out: Path = RESULTS, sizes: tuple[int, ...] = SIZES, rounds: int = 3) -> int:
    """Every size ``rounds`` times (a fresh run each); each move's medians over the rounds."""
    root = Path(tempfile.mkdtemp(prefix="tidal-bench-reduce-pause-"))
    results = []
    for round_ in range(1, rounds + 1):
        for keys in sizes:
            print(f"… round {round_}: {keys:,} keys", flush=True)
            results.append({**run_size(keys, root / f"round-{round_}"), "round": round_})
    goal = {100_000: 10.0, 1_000_000: 30.0}
    print()
    print("| keys in the state | move | pause (median; rounds) | stop | Spark's repartition | restart to its first batch | goal |")  # noqa: E501  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for keys in sizes:
        for partitions in MOVES:
            moves = [m for r in results if r["keys"] == keys for m in r["moves"] if m["to"] == partitions]
            if not moves:
                continue
            pause = statistics.median(m["pause_s"] for m in moves)
            stop = statistics.median(m["stop_s"] for m in moves)
            spark = statistics.median(m["repartition_s"] for m in moves)
            rest = statistics.median(m["pause_s"] - m["stop_s"] - m["repartition_s"] for m in moves)
            target = goal.get(keys)
            each = " / ".join(f"{m['pause_s']:.1f}" for m in moves)
            print(f"| {keys:,} | {moves[0]['from']} → {partitions} | **{pause:.1f} s** ({each}) "
                  f"| {stop:.1f} s | {spark:.1f} s "
                  f"| {rest:.1f} s | {f'≤ {target:g} s' if target else '—'} |")  # fmt: skip
    path = write_result("reduce-pause", {"rounds": rounds, "results": results}, out)
    print(f"wrote {path}")
    return 0
