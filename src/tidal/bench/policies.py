"""Benchmark: the demo's wave pipeline on real Spark under ``policy: numaflow`` and ``policy: tidal``.

The wave pipeline (``tidal/examples/wave.yaml``: 900 orders/s for 40 s every 110 s, ``enrich``
at 2 ms an order) runs for ``DURATION`` seconds (two waves and the drain of the second) with
``tidal run``, in local mode (``local[2]``), once under each policy, alternating, ``ROUNDS``
times. Reported per policy: the drain time of each wave at ``enrich`` (from the moment its
backlog appears to the moment it is back at zero, the report's ``drains``), the replica-seconds
of all vertices, and the orders delivered. End-to-end delay per message is not measured here
(issue #21); the drain time is its upper bound for the wave's messages.

Run: ``tidal bench policies``. Numbers go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tidal.bench import RESULTS, write_result

DURATION = 240.0
ROUNDS = 1
POLICIES = ("numaflow", "tidal")


def wave_spec(root: Path, policy: str) -> Path:
    import tidal.examples

    spec = yaml.safe_load((Path(tidal.examples.__file__).parent / "wave.yaml").read_text())
    spec["policy"] = policy
    path = root / f"wave-{policy}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def run_wave(root: Path, policy: str, n: int, duration: float = DURATION) -> dict[str, Any]:
    from tidal.observe.report import summarize

    run_dir = root / f"{policy}-{n}"
    proc = subprocess.run(
        [sys.executable, "-m", "tidal", "run", str(wave_spec(root, policy)), "--run-dir", str(run_dir),
         "--duration", str(duration), "--no-metrics", "--no-live"],
        check=False, capture_output=True, text=True, timeout=duration + 300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"the {policy} wave run failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    vertices = {s.vertex: s for s in summarize(run_dir)}
    return {
        "drains": vertices["enrich"].drains,
        "replica_seconds": round(sum(s.replica_seconds for s in vertices.values()), 1),
        "enrich_replica_seconds": vertices["enrich"].replica_seconds,
        "delivered": vertices["archive"].processed,
    }


def main(out: Path = RESULTS, rounds: int = ROUNDS) -> int:
    root = Path(tempfile.mkdtemp(prefix="tidal-bench-policies-"))
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in POLICIES}
    for n in range(rounds):  # alternate, so drift on a shared machine hits both
        for policy in POLICIES:
            runs[policy].append(run_wave(root, policy, n))
            r = runs[policy][-1]
            print(f"round {n + 1} {policy}: drains {r['drains']} s, {r['replica_seconds']:g} replica-s, "
                  f"{r['delivered']:,} delivered")  # fmt: skip
    print()
    print("| policy | enrich drain per wave s | median drain s | replica-s | enrich replica-s | delivered |")
    print("|---|---|---|---|---|---|")
    summary: dict[str, dict[str, float]] = {}
    for policy, rs in runs.items():
        drains = [d for r in rs for d in r["drains"]]
        summary[policy] = {
            "drain": statistics.median(drains) if drains else float("nan"),
            "replica_seconds": statistics.median(r["replica_seconds"] for r in rs),
        }
        waves = "; ".join(", ".join(f"{d:g}" for d in r["drains"]) for r in rs)
        delivered = ", ".join(f"{r['delivered']:,}" for r in rs)
        enrich = statistics.median(r["enrich_replica_seconds"] for r in rs)
        print(f"| {policy} | {waves} | {summary[policy]['drain']:g} | {summary[policy]['replica_seconds']:g} "
              f"| {enrich:g} | {delivered} |")  # fmt: skip
    t, nf = summary["tidal"], summary["numaflow"]
    print(f"\ntidal / numaflow: drain {t['drain'] / nf['drain']:.2f}×, "
          f"replica-seconds {t['replica_seconds'] / nf['replica_seconds']:.2f}×")  # fmt: skip
    path = write_result("policies", {"runs": runs, "summary": summary}, out)
    print(f"wrote {path}")
    return 0
