"""``tidal bench hosts``: one pipeline on four hosts of the rig, under each fault of issue #38.

The layout is the tests' (tests/integration/test_hosts.py): the driver and the Spark master on
one host, a Spark worker and a JetStream server on each of three others, buffers kept by all
three (``replicas: 3``). The generator sends ``RATE`` msg/s for ``TOTAL / RATE`` seconds into an
autoscaled map and a file sink. Each scenario runs it once:

- **clean**: no fault, the baseline;
- **slow host**: w3's link adds 200 ms to every frame it sends (userspace netem, tidal.rig.wire);
- **lossy link**: w2's link drops 5 % of frames each way;
- **worker host lost**: w1 (its executor, its worker and its NATS server) SIGKILLed once a
  quarter of the messages arrived;
- **JetStream server lost**: only w2's ``nats-server`` SIGKILLed at the same point (its host,
  worker and executor keep running).

Measured: every id delivered once (or not); the delivery delay (source time → sink commit) p50,
p99 and max; the longest gap between two deliveries (how long the sink saw nothing: the
recovery of a loss); the seconds from when the source's last message was due (first delivery +
``TOTAL / RATE``) to the last delivery (the drain); the map's scale-ups; the executors lost.
Root only (network namespaces).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, delivered_ids, rig_refusal, write_result
from tidal.controller.events import EventLog

__all__ = ["SCENARIOS", "main", "run_scenario"]

RATE, TOTAL = 500, 15_000
PIPELINE = """
name: hosts
limits: {{readBatchSize: 250}}
controller: {{intervalSeconds: 0.5}}
buffers: {{backend: jetstream, url: "{url}", replicas: 3}}
cluster: {{executorCores: 1, minExecutors: 1, maxExecutors: 3}}
vertices:
  - name: gen
    source: {{generator: {{rate: {rate}, maxMessages: {total}, msgSize: 30}}}}
    scale: {{disabled: true}}
  - name: work
    udf: {{map: "tidal.examples.udfs:upper"}}
    scale: {{min: 1, max: 2, lookbackSeconds: 5, scaleUpCooldownSeconds: 5, scaleDownCooldownSeconds: 10}}
  - name: out
    sink: {{file: {{path: out.jsonl}}}}
    scale: {{disabled: true}}
edges:
  - {{from: gen, to: work, chain: false}}
  - {{from: work, to: out, chain: false}}
"""
SCENARIOS: dict[str, dict[str, Any]] = {
    "clean": {},
    "slow host (w3 +200 ms)": {"impaired": {"w3": (0.2, 0.0)}},
    "lossy link (w2 5 %)": {"impaired": {"w2": (0.0, 0.05)}},
    "worker host lost (w1)": {"kill": "w1"},
    "JetStream server lost (w2's)": {"kill": "w2", "only": "nats-server"},
}


def run_scenario(name: str, root: Path, total: int = TOTAL, rate: int = RATE) -> dict[str, Any]:
    from tidal.observe.latency import read_delays
    from tidal.rig import Impairment, Rig
    from tidal.rig.nats_cluster import start_nats_cluster
    from tidal.rig.spark_cluster import alive_workers, start_spark_cluster
    from tidal.scaling.latency import pooled
    from tidal.spark.cluster.executors import read_executor_log

    scenario = SCENARIOS[name]
    impaired = {h: Impairment(delay=d, loss=p) for h, (d, p) in scenario.get("impaired", {}).items()}
    work = root / name.split(maxsplit=1)[0]
    rig = Rig(["driver", "w1", "w2", "w3"], impaired=impaired)
    with rig:
        workers = [rig["w1"], rig["w2"], rig["w3"]]
        url = start_nats_cluster(workers, work / "nats", probe_from=rig["driver"])
        cluster = start_spark_cluster(rig["driver"], workers, work / "spark", cores=1)
        spec = work / "hosts.yaml"
        spec.write_text(PIPELINE.format(url=url, total=total, rate=rate))
        run_dir = work / "run"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "SPARK_LOCAL_IP": rig["driver"].address}
        command = [sys.executable, "-m", "tidal", "run", str(spec), "--run-dir", str(run_dir),
                   "--master", cluster.master, "--no-metrics", "--no-live"]  # fmt: skip
        with (work / "run.out").open("w") as log:
            proc = rig["driver"].popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        killed_at = None
        deadline = time.monotonic() + 1800
        try:
            while len(delivered_ids(run_dir / "out.jsonl")) < total:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{name}: the run ended or stalled; see {work / 'run.out'}")
                if (
                    "kill" in scenario
                    and killed_at is None
                    and len(delivered_ids(run_dir / "out.jsonl")) >= total // 4
                ):
                    killed_at = time.time()
                    rig[scenario["kill"]].kill(scenario.get("only"))
                time.sleep(0.5)
            time.sleep(2)  # anything doubled would show up now
            alive = alive_workers(cluster, rig["driver"])
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=180)
        ids = delivered_ids(run_dir / "out.jsonl")
        samples = [s for v in read_delays(run_dir).values() for s in v]
        commits = sorted(s.at for s in samples)
        whole = pooled(samples, commits[-1] if commits else 0.0)
        gaps = [(a, b - a) for a, b in itertools.pairwise(commits)]
        lost = len(read_executor_log(run_dir)["lost"])
        events = EventLog(run_dir / "events.jsonl").read()
        ups = [e for e in events if e.vertex == "work" and e.desired > e.current]
    # The source's last message is due total/rate seconds after its first, delivered at commits[0].
    source_end = commits[0] + total / rate if commits else 0.0
    after_loss = [g for at, g in gaps if killed_at is not None and at + g > killed_at]
    return {
        "scenario": name,
        "exactly_once": len(ids) == len(set(ids)) == total,
        "delivered": len(set(ids)),
        "p50": round(whole.p50, 2),
        "p99": round(whole.p99, 2),
        "max": round(whole.max, 2),
        "longest_gap": round(max((g for _, g in gaps), default=0.0), 1),
        "gap_after_loss": round(max(after_loss), 1) if after_loss else None,
        "drain": round(commits[-1] - source_end, 1) if commits else None,
        "scale_ups": len(ups),
        "lost_executors": lost,
        # For the test that runs a scenario (tests/integration/test_hosts.py):
        "ids": ids,
        "run_dir": str(run_dir),
        "hosts": {h.name: h.address for h in workers},
        "alive_workers": sorted(alive),
        "killed": scenario.get("kill"),
    }


_FOR_THE_TEST = ("ids", "run_dir", "hosts", "alive_workers")


def main(out: Path = RESULTS) -> int:
    refusal = rig_refusal("hosts")
    if refusal is not None:
        print(refusal)
        return 2
    root = Path(tempfile.mkdtemp(prefix="tidal-bench-hosts-"))
    rows = []
    try:
        for name in SCENARIOS:
            print(f"… {name}", flush=True)
            row = run_scenario(name, root)
            rows.append({k: v for k, v in row.items() if k not in _FOR_THE_TEST})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print(f"| {RATE} msg/s × {TOTAL // RATE} s on 4 hosts | once | p50 delay | p99 | max | longest gap "
          "| drain after the source | scale-ups | executors lost |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        once = "yes" if r["exactly_once"] else "NO"
        print(f"| {r['scenario']} | {once} | {r['p50']} s | {r['p99']} s | {r['max']} s "
              f"| {r['longest_gap']} s | {r['drain']} s | {r['scale_ups']} "
              f"| {r['lost_executors']} |")  # fmt: skip
    path = write_result("hosts", {"rate": RATE, "total": TOTAL, "rows": rows}, out)
    print(f"wrote {path}")
    return 0 if all(r["exactly_once"] for r in rows) else 1
