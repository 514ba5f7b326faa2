"""Benchmark (#60 part 4): a reduce vertex whose load steps up 4× and back, with its state
partitions moved by the policy, against the same vertex fixed at the start's count and fixed at
the peak's.

The pipeline: the generator (``bursty``: ``BASE``/s, then ``4 × BASE``/s for ``BURST_S`` from
``BURST_AT``, then ``BASE``/s again) → a map keying each message into one of 16 buckets → a keyed
reduce on fixed windows of ``WINDOW`` whose handler costs ``COST`` s a message
(:class:`~tidal.examples.numaflow.SlowReduceCounter`: a lookup-bound aggregation, the work after
the shuffle, which state partitions parallelise) → a file sink. ``local[4]``: four task slots,
so up to four partitions run side by side (the work sleeps, as a lookup waits, so the slots
are not bound by this box's two cores). Idle-source watermarks close the last windows.

Three jobs, one after the other, on the same trace:

- **elastic**: ``partitions: 1`` and ``statePartitions: {min: 1, max: 4}``: the policy moves it;
- **fixed-start**: 1 partition for the whole run;
- **fixed-peak**: 4 partitions for the whole run.

Reported per job: state-partition-seconds (the count integrated over the run, from the move
events), each move's pause, p99 delivery delay and messages/s delivered before, during and after
the burst, and the check that every message is counted once (the windows' counts sum to the
messages generated, no window twice). The issue's goal: the elastic job clears its backlog at
≤ 0.7× the partition-seconds of the fixed-peak job. Run: ``tidal bench reduce-elastic``;
numbers go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, stop_driver, write_result

__all__ = ["JOBS", "main", "run_job"]

BASE, PEAK = 60.0, 240.0  # messages/s: the peak is 4× the base
BURST_AT, BURST_S, AFTER_S = 60.0, 120.0, 90.0
TOTAL = int(BASE * BURST_AT + PEAK * BURST_S + BASE * AFTER_S)
COST = 0.006  # seconds of handler work per message (SlowReduceCounter)
WINDOW = 5  # seconds
MASTER = "local[4]"
JOBS: dict[str, dict[str, Any]] = {
    "elastic": {"partitions": 1, "statePartitions": {"min": 1, "max": 4, "cooldownSeconds": 20}},
    "fixed-start": {"partitions": 1},
    "fixed-peak": {"partitions": 4},
}

PIPELINE = """
name: elastic
limits: {{readBatchSize: 200}}
controller: {{intervalSeconds: 1}}
watermark: {{idleSource: {{threshold: 3s, incrementBy: 3s, stepInterval: 1s}}}}
vertices:
  - name: gen
    source:
      generator: {{rate: {base}, shape: bursty, peak: {peak}, at: {at}, duration: {burst}, period: 1000000,
                  maxMessages: {total}, msgSize: 30}}
    scale: {{disabled: true}}
  - name: key
    udf: {{pynumaflow: "tidal.examples.numaflow:by_bucket"}}
  - name: count
    udf:
      reduce: "tidal.examples.numaflow:SlowReduceCounter"
      reduceArgs: [0, {cost}]
      groupBy: {{window: {{fixed: {{length: {window}s}}}}, keyed: true}}
{partitions}
    scale: {{targetProcessingSeconds: 3}}
  - name: out
    sink: {{file: {{path: out.jsonl}}}}
edges:
  - {{from: gen, to: key, chain: false}}
  - {{from: key, to: count}}
  - {{from: count, to: out}}
"""


def spec_text(job: str) -> str:
    lines = [f"    partitions: {JOBS[job]['partitions']}"]
    if "statePartitions" in JOBS[job]:
        lines.append(f"    statePartitions: {json.dumps(JOBS[job]['statePartitions'])}")
    return PIPELINE.format(
        base=BASE, peak=PEAK, at=BURST_AT, burst=BURST_S, total=TOTAL, cost=COST, window=WINDOW,
        partitions="\n".join(lines),
    )  # fmt: skip


def _windows(out: Path) -> dict[str, int]:
    """Each delivered window's count, by its id (a window delivered twice is kept twice: ``#2``)."""
    found: dict[str, int] = {}
    if not out.exists():
        return found
    for line in out.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        key = record["id"]
        while key in found:
            key += "#2"
        found[key] = int(record["payload"])
    return found


def _events(run_dir: Path) -> list[dict[str, Any]]:
    from tidal.controller.faults import read_jsonl

    return read_jsonl(run_dir / "events.jsonl")


def _batches(run_dir: Path) -> list[tuple[float, int]]:
    """``(committed at, messages read)`` of each of the reduce vertex's batches (the ledger)."""
    from tidal.isb.control import ControlStore

    control = ControlStore(run_dir / "pipeline.db")
    try:
        return [(b.at, b.rows) for b in control.batches("count")]
    finally:
        control.close()


def partition_seconds(start: int, moves: list[tuple[float, int]], began: float, ended: float) -> float:
    """The state partitions integrated over ``[began, ended]``: ``start`` until the first move."""
    total, count, since = 0.0, start, began
    for moved_at, after in sorted(moves):
        at = min(max(moved_at, began), ended)
        total += count * (at - since)
        count, since = after, at
    return total + count * (ended - since)


def _move(event: dict[str, Any], began: float) -> dict[str, Any]:
    inputs = event["inputs"]
    return {
        "at_s": round(float(event["at"]) - began, 1),
        "to": inputs["partitions"],
        "ok": event["rule"] == "repartitioned",
        "pause_s": inputs.get("pause_seconds"),
        "by": str(inputs.get("by", ""))[:60],
    }


def run_job(job: str, root: Path) -> dict[str, Any]:
    """One job on the trace: run it until every message is counted (or a deadline), then read."""
    from tidal.observe.latency import read_delays
    from tidal.scaling.latency import quantile

    work = root / job
    work.mkdir(parents=True)
    spec = work / "elastic.yaml"
    spec.write_text(spec_text(job))
    run_dir = work / "run"
    command = [sys.executable, "-m", "tidal", "run", str(spec), "--run-dir", str(run_dir),
               "--master", MASTER, "--no-metrics", "--no-live"]  # fmt: skip
    began = time.time()
    deadline = time.monotonic() + BURST_AT + BURST_S + AFTER_S + 600
    with (work / "run.out").open("w") as log:
        driver = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while sum(_windows(run_dir / "out.jsonl").values()) < TOTAL:
                if driver.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"reduce-elastic {job}: the run ended or stalled; see {work}")
                time.sleep(1.0)
            ended = time.time()
        finally:
            stop_driver(driver)
    windows = _windows(run_dir / "out.jsonl")
    events = _events(run_dir)
    moves = [e for e in events if e["rule"] in ("repartitioned", "repartition-failed")]
    done = [(float(e["at"]), int(e["inputs"]["partitions"])) for e in moves]
    start = int(JOBS[job]["partitions"])
    samples = sorted((s for v in read_delays(run_dir).values() for s in v), key=lambda s: s.at)
    phases = {
        "before": (began, began + BURST_AT),
        "during": (began + BURST_AT, began + BURST_AT + BURST_S),
        "after": (began + BURST_AT + BURST_S, ended),
    }
    batches = _batches(run_dir)
    by_phase: dict[str, dict[str, float | None]] = {}
    for phase, (a, b) in phases.items():
        inside = [s for s in samples if a <= s.at < b]
        rows = sum(n for at, n in batches if a <= at < b)
        by_phase[phase] = {
            "p99_s": round(quantile(inside, 0.99), 2) if inside else None,
            "processed_per_s": round(rows / (b - a), 1) if b > a else None,
        }
    return {
        "job": job,
        "partition_seconds": round(partition_seconds(start, done, began, ended), 1),
        "seconds": round(ended - began, 1),
        "moves": [_move(e, began) for e in moves],
        "phases": by_phase,
        "p99_s": round(quantile(samples, 0.99), 2) if samples else None,
        "counted": sum(windows.values()),
        "doubled": sum(1 for k in windows if k.endswith("#2")),
        "exact": sum(windows.values()) == TOTAL and not any(k.endswith("#2") for k in windows),
    }


def main(out: Path = RESULTS) -> int:
    root = Path(tempfile.mkdtemp(prefix="tidal-bench-reduce-elastic-"))
    rows = []
    for job in JOBS:
        print(f"… {job}", flush=True)
        rows.append(run_job(job, root))
        r = rows[-1]
        moved = [(m["at_s"], m["to"], m["pause_s"]) for m in r["moves"]]
        print(f"  {r['partition_seconds']} partition-s over {r['seconds']} s; p99 {r['p99_s']} s; "
              f"moves {moved}; exact {r['exact']}")  # fmt: skip
    peak = next(r for r in rows if r["job"] == "fixed-peak")["partition_seconds"]
    print()
    print("| job | partition-s (× fixed-peak) | p99 before / during / after | read/s before / during / after | moves (at s → count, pause s) | every message once |")  # noqa: E501  # fmt: skip
    print("|---|---|---|---|---|---|")
    for r in rows:
        ph = r["phases"]
        moves = ", ".join(f"{m['at_s']:.0f} → {m['to']} ({m['pause_s']})" for m in r["moves"]) or "—"
        print(f"| {r['job']} | {r['partition_seconds']:.0f} ({r['partition_seconds'] / peak:.2f}×) "
              f"| {ph['before']['p99_s']} / {ph['during']['p99_s']} / {ph['after']['p99_s']} s "
              f"| {ph['before']['processed_per_s']} / {ph['during']['processed_per_s']} / "
              f"{ph['after']['processed_per_s']} | {moves} | {'yes' if r['exact'] else 'NO'} |")  # fmt: skip
    path = write_result("reduce-elastic", {"total": TOTAL, "rows": rows}, out)
    print(f"wrote {path}")
    return 0 if all(r["exact"] for r in rows) else 1
