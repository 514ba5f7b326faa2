"""Benchmark: executors on a standalone cluster on 127.0.0.1 — scale-up latency and what the wave costs.

**Scale-up latency.** A two-vertex pipeline (generator → blackhole, autoscaling off) runs on a
cluster of two 2-core workers with 1-core executors. Ten times: the sink's replicas go 1 → 2 (Σ
replicas 2 → 3, one more executor), the new executor registers and runs a task, then the
replicas go back and the executor is killed. Per scale-up, from ``executors.jsonl``: the
allocator's request → the executor registered (Spark's add time) → its first task done
(observed by the allocator, every 0.5 s). The controller's decision precedes the request by at
most the allocator's interval (0.5 s); here the replica change is written directly.

**The wave on the cluster.** ``tidal/examples/wave.yaml`` (two waves of 900 orders/s for 40 s,
110 s apart) on four 2-core workers, twice, one after the other: Tidal (executors follow Σ
replicas, 1..4 two-core executors) and static provisioning for the peak (every vertex at its
``max`` replicas, 4 executors from start to end). Executor-seconds come from each run's
``executors.jsonl``; the drain time of each wave is the report's (pending leaving 0 → back at 0)
for the bottleneck vertex ``enrich``.

Run: ``tidal bench cluster`` (about 12 minutes). Numbers go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from tidal.bench import RESULTS, write_result

SCALE_UPS = 10
WAVE_SECONDS = 240.0  # two waves and the drain of the second
LATENCY_PIPELINE = """
name: latency
controller: {intervalSeconds: 0.5}
cluster: {executorCores: 1, minExecutors: 1, maxExecutors: 4, shrinkWaitSeconds: 5}
vertices:
  - name: gen
    source: {generator: {rate: 50, msgSize: 30}}
    scale: {disabled: true}
  - name: out
    sink: {blackhole: {}}
    scale: {disabled: true}
edges: [{from: gen, to: out, chain: false}]  # two queries: one executor each
"""


def _tidal(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tidal", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )


def _wait(condition: Any, timeout: float, what: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise RuntimeError(f"tidal exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=180)


def scale_up_latency(root: Path, scale_ups: int = SCALE_UPS) -> list[dict[str, float]]:
    from tidal.isb.control import ControlStore
    from tidal.spark.cluster.executors import read_executor_log
    from tidal.spark.cluster.standalone import StandaloneCluster

    spec = root / "latency.yaml"
    spec.write_text(LATENCY_PIPELINE)
    run_dir = root / "latency-run"
    with StandaloneCluster(root / "cluster-latency", workers=2, cores=2) as cluster:
        assert cluster.info is not None
        proc = _tidal("run", str(spec), "--run-dir", str(run_dir), "--master", cluster.info.master,
                      "--no-metrics", "--no-live")  # fmt: skip

        def count() -> int:
            counts = read_executor_log(run_dir)["count"]
            return int(counts[-1]["executors"]) if counts else 0

        def started() -> int:
            return len(read_executor_log(run_dir)["startup"])

        try:
            _wait(lambda: count() == 2 and started() >= 2, 180, "two executors at work", proc)
            control = ControlStore(run_dir / "pipeline.db")
            for i in range(scale_ups):
                before = started()
                control.set_replicas("out", 2)
                _wait(lambda b=before: started() > b, 120, f"scale-up {i + 1}", proc)
                control.set_replicas("out", 1)
                _wait(lambda: count() == 2, 120, f"scale-down {i + 1}", proc)
                time.sleep(2)  # the killed executor is gone from the list, the next one is new
                s = read_executor_log(run_dir)["startup"][-1]
                print(f"scale-up {i + 1}: registered after {s['registered_after']:.1f} s, "
                      f"first task done after {s['first_task_after']:.1f} s")  # fmt: skip
        finally:
            _stop(proc)
    return [
        {"registered": s["registered_after"], "first_task": s["first_task_after"]}
        for s in read_executor_log(run_dir)["startup"][2:]
    ]


def _wave_spec(root: Path, static: bool) -> Path:
    import tidal.examples

    spec = yaml.safe_load((Path(tidal.examples.__file__).parent / "wave.yaml").read_text())
    if static:  # every vertex at its max from the start; executors for all of them, always
        for v in spec["vertices"]:  # a vertex without a scale block runs in its chain's query
            if "scale" in v:
                v["replicas"] = v["scale"]["max"]
                v["scale"] = {"disabled": True}
        spec["cluster"]["minExecutors"] = spec["cluster"]["maxExecutors"]
    path = root / f"wave-{'static' if static else 'tidal'}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def wave_cost(root: Path, static: bool, duration: float = WAVE_SECONDS) -> dict[str, Any]:
    from tidal.observe.report import summarize, summarize_executors

    name = "static" if static else "tidal"
    run_dir = root / f"wave-{name}"
    proc = _tidal("run", str(_wave_spec(root, static)), "--run-dir", str(run_dir), "--cluster", "local:4x2",
                  "--duration", str(duration), "--no-metrics", "--no-live")  # fmt: skip
    out, _ = proc.communicate(timeout=duration + 300)
    if proc.returncode != 0:
        raise RuntimeError(f"the {name} wave run failed:\n{out[-3000:]}")
    cost = summarize_executors(run_dir)
    assert cost is not None
    vertices = {s.vertex: s for s in summarize(run_dir)}
    return {
        "executor_seconds": cost.executor_seconds,
        "core_seconds": cost.core_seconds,
        "peak_executors": cost.peak,
        "drains": vertices["enrich"].drains,
        "delivered": vertices["archive"].processed,
        "first_task_median": cost.first_task_median,
    }


def main(out: Path = RESULTS) -> int:
    root = Path(tempfile.mkdtemp(prefix="tidal-bench-cluster-"))
    try:
        ups = scale_up_latency(root)
        registered = [u["registered"] for u in ups]
        first = [u["first_task"] for u in ups]
        waves = {"tidal": wave_cost(root, static=False), "static": wave_cost(root, static=True)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print(f"| scale-up ({len(ups)} times) | median | max |")
    print("|---|---|---|")
    print(
        f"| request → executor registered | {statistics.median(registered):.1f} s | {max(registered):.1f} s |"
    )
    print(f"| request → first task done on it | {statistics.median(first):.1f} s | {max(first):.1f} s |")
    t, s = waves["tidal"], waves["static"]
    print()
    print("| wave demo on 4 two-core workers | executor-seconds | core-seconds | peak executors "
          "| enrich drain per wave (s) | delivered |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, w in (("Tidal (executors follow replicas)", t), ("static for the peak", s)):
        drains = ", ".join(f"{d:g}" for d in w["drains"]) or "—"
        print(f"| {name} | {w['executor_seconds']:g} | {w['core_seconds']:g} | {w['peak_executors']} "
              f"| {drains} | {w['delivered']:,} |")  # fmt: skip
    ratio = t["executor_seconds"] / s["executor_seconds"] if s["executor_seconds"] else float("nan")
    print(f"\nTidal / static executor-seconds = {ratio:.2f}×")
    path = write_result(
        "cluster",
        {
            "scale_ups": ups,
            "median": {"registered": statistics.median(registered), "first_task": statistics.median(first)},
            "waves": waves,
            "ratio": ratio,
        },
        out,
    )
    print(f"wrote {path}")
    return 0
