"""``tidal bench chaos-receivers``: a receiver host cut while the HTTP source's receivers scale up.

The chaos bench (:mod:`tidal.bench.chaos`) injects its faults inside a map's scale-up; issue #57
asks for "a receiver host cut" too, inside a scale event of the receivers themselves. The rig is
``tidal bench receivers``' (:mod:`tidal.bench.receiver_hosts`): the driver (the activator, Spark in
local mode), a JetStream cluster on ``n1``–``n3``, a receiver agent on ``r1`` and on ``r2``. The
KPA keeps two receivers (one per host) at the base load: a retrying client at ``BASE`` requests/s.
At ``STEP_AT`` s a second client adds ``STEP`` requests/s over more connections, so the in-flight
requests rise and the KPA scales the receivers up; a seeded moment (0–1.5 s) after its first
scale-up decision, ``r2`` is cut: its link down, then every process on it SIGKILLed.

Checked with :mod:`tidal.bench.chaos_checks`: every message of every request answered 2xx
delivered exactly once; the receivers' ready count (``requests.jsonl``) never drops during the
scale-up except inside the fault's window, and no more than the receivers the run called lost on
``r2`` (its own ``receiver lost`` faults); recovery from the cut to the first delivery after it and
to the in-flight requests back under their level at the cut. Root only (network namespaces).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, delivered_ids, rig_refusal, stop_driver, write_result
from tidal.bench import chaos_checks as checks
from tidal.bench.chaos_checks import Fault
from tidal.bench.receiver_hosts import AGENT_PORT, _series, _wait

__all__ = ["main", "run_receiver_cut"]

BASE, STEP, STEP_AT, BATCH = 40.0, 160.0, 10.0, 10  # requests/s, requests/s, s, messages a request
BASE_REQUESTS, STEP_REQUESTS, STEP_CONNECTIONS = 1600, 2400, 32
GRACE = 10.0  # seconds after the cut in which a fall of the ready receivers is the cut's doing
PIPELINE = """
name: front
controller: {{intervalSeconds: 0.5}}
buffers: {{backend: jetstream, url: "{url}", replicas: 3}}
vertices:
  - name: in
    source: {{http: {{containerConcurrency: 4, receiverHosts: [{agents}], agentToken: {{file: "{token}"}}}}}}
    replicas: 2
    kpa: {{min-scale: 2, max-scale: 6, target: 1, window: 6s}}
  - name: out
    sink: {{file: {{path: out.jsonl}}}}
edges:
  - {{from: in, to: out}}
"""


def _receiver_rows(run_dir: Path) -> list[dict[str, Any]]:
    """``requests.jsonl`` as the checks' series of the ``in`` vertex: its replicas are the ready
    receivers, its backlog the requests in flight or held by the activator (Knative's measure)."""
    return [
        {"name": "in", "at": s["at"], "replicas": s.get("ready", 0),
         "pending": float(s.get("concurrency", 0.0)) + float(s.get("held", 0))}
        for s in _series(run_dir, "requests.jsonl")
    ]  # fmt: skip


def _scale_up_at(run_dir: Path, after: float) -> float | None:
    from tidal.controller.faults import read_jsonl

    ups = [
        float(e["at"])
        for e in read_jsonl(run_dir / "events.jsonl")
        if e["vertex"] == "in" and int(e["desired"]) > int(e["current"]) > 0 and float(e["at"]) >= after
    ]
    return min(ups, default=None)


def _ready_drops(
    rows: list[dict[str, Any]], events: list[dict[str, Any]], after: float, fault: Fault, lost: int
) -> checks.Found:
    """The receivers' scale-up lasts from the KPA's first scale-up after the step to its first
    decision down (its own choice: the stable window saw the load pass, or a retry storm of 429s
    from a full buffer end). Inside it, any fall of the ready count is a violation unless it
    came in the cut's window (``grace`` s) and the falls there sum to no more than the receivers
    the run called lost on the cut host. (:func:`chaos_checks.replica_drops_in_scale_ups` ends a
    scale-up on the backlog alone, which a KPA scale-down under 429 retries does not clear.)"""
    mine = sorted(
        (e for e in events if e["vertex"] == "in" and float(e["at"]) >= after), key=lambda e: e["at"]
    )
    up = next((float(e["at"]) for e in mine if int(e["desired"]) > int(e["current"])), None)
    out = checks.Found({"scale_ups": 0 if up is None else 1, "drops_explained": 0, "replicas_explained": 0})
    if up is None:
        return out
    down = next(
        (float(e["at"]) for e in mine if float(e["at"]) > up and int(e["desired"]) < int(e["current"])), None
    )
    inside = [r for r in rows if up <= float(r["at"]) <= (down if down is not None else float("inf"))]
    for prev, row in itertools.pairwise(inside):
        fell = int(prev["replicas"]) - int(row["replicas"])
        if fell <= 0:
            continue
        if fault.at <= float(row["at"]) <= fault.at + GRACE:
            out.numbers["drops_explained"] += 1
            out.numbers["replicas_explained"] += fell
        else:
            out.violations.append(
                f"in: ready {prev['replicas']} → {row['replicas']} at {row['at']:.1f}, no fault"
            )
    if out.numbers["replicas_explained"] > lost:
        out.violations.append(
            f"{out.numbers['replicas_explained']} ready receivers dropped in the cut's window; "
            f"the run called {lost} lost"
        )
    return out


def _client(rig: Any, root: Path, url: str, prefix: str, total: int, rate: float, conns: int) -> Any:
    progress, answers = root / f"client-{prefix}.progress", root / f"client-{prefix}.json"
    command = [sys.executable, "-m", "tidal.bench.retrying_client", url, str(total), str(rate), str(BATCH),
               str(progress), str(answers), prefix, str(conns)]  # fmt: skip
    proc = rig["driver"].popen(
        command, stdout=subprocess.DEVNULL, stderr=(root / f"client-{prefix}.err").open("w")
    )
    return proc, answers


def run_receiver_cut(root: Path, seed: int = 0) -> dict[str, Any]:
    """The scenario once: what the checks found, the recovery, and the run's numbers."""
    from tidal.controller.faults import FaultLog, read_faults, read_jsonl
    from tidal.observe.latency import read_delays
    from tidal.rig import Rig
    from tidal.rig.nats_cluster import start_nats_cluster

    rng = random.Random(f"receivers:{seed}")
    rig = Rig(["driver", "n1", "n2", "n3", "r1", "r2"])
    with rig:
        url = start_nats_cluster([rig["n1"], rig["n2"], rig["n3"]], root / "nats", probe_from=rig["driver"])
        token = root / "agent.token"
        token.write_text("bench-agent-token\n")
        token.chmod(0o600)
        agents = []
        for name in ("r1", "r2"):
            address, log = f"{rig[name].address}:{AGENT_PORT}", root / f"agent-{name}.out"
            with log.open("w") as out:
                agent = [sys.executable, "-m", "tidal", "agent", "--listen", address,
                         "--log-dir", str(root / f"agent-{name}"), "--token-file", str(token)]  # fmt: skip
                rig[name].popen(agent, stdout=out, stderr=subprocess.STDOUT)
            agents.append((address, log))
        for _, log in agents:
            deadline = time.monotonic() + 60
            while "tidal agent on" not in (log.read_text() if log.exists() else ""):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"an agent did not start: {log.read_text()}")
                time.sleep(0.2)
        spec = root / "front.yaml"
        spec.write_text(PIPELINE.format(url=url, agents=", ".join(f'"{a}"' for a, _ in agents), token=token))
        run_dir, run_log = root / "run", root / "run.out"
        command = [sys.executable, "-m", "tidal", "run", str(spec), "--run-dir", str(run_dir),
                   "--no-metrics", "--no-live"]  # fmt: skip
        with run_log.open("w") as out:
            proc = rig["driver"].popen(
                command, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=out, stderr=subprocess.STDOUT
            )
        faults: list[Fault] = []
        lost_host = rig["r2"].address
        try:
            _wait("two ready receivers", lambda: any(r["replicas"] >= 2 for r in _receiver_rows(run_dir)),
                  180, proc, run_log)  # fmt: skip
            public = (run_dir / "in.url").read_text().strip()
            base, base_out = _client(rig, root, public, "a", BASE_REQUESTS, BASE, 8)
            time.sleep(STEP_AT)
            stepped = time.time()
            step, step_out = _client(rig, root, public, "b", STEP_REQUESTS, STEP, STEP_CONNECTIONS)
            _wait("the receivers' first scale-up after the step", lambda: _scale_up_at(run_dir, stepped),
                  120, proc, run_log)  # fmt: skip
            time.sleep(rng.uniform(0.0, 1.5))  # a seeded moment inside the scale event
            at = time.time()
            rig["r2"].link(False)  # first: a killed process's kernel would still send resets
            rig["r2"].kill()
            faults.append(
                Fault("receiver host", at, f"receiver host r2 ({lost_host}) cut: link down, all SIGKILLed")
            )
            FaultLog(run_dir / "faults.jsonl").record(
                "injected: receiver host cut", "in", faults[0].cause, at=at
            )
            base.wait(timeout=900)
            step.wait(timeout=900)
            answers = [json.loads(p.read_text()) for p in (base_out, step_out)]
            acknowledged = {f"{k}-{i}/{j}" for k, a in zip("ab", answers, strict=True)
                            for i in a["ok"] for j in range(BATCH)}  # fmt: skip
            sink = run_dir / "out.jsonl"

            def settled() -> bool:
                lost = [
                    f for f in read_faults(run_dir) if f["kind"] == "receiver lost" and f["host"] == lost_host
                ]
                rows = _receiver_rows(run_dir)
                return (
                    acknowledged <= set(delivered_ids(sink))
                    and bool(lost)
                    and any(r["at"] > at and r["replicas"] >= 2 for r in rows)
                )

            _wait(
                "every acknowledged message, and two receivers ready after the cut",
                settled,
                300,
                proc,
                run_log,
            )
            time.sleep(2)  # anything doubled would show up now
        finally:
            stop_driver(proc)
        ids = delivered_ids(sink)
        rows = _receiver_rows(run_dir)
        delays = [s for v in read_delays(run_dir).values() for s in v]
        lost = [f for f in read_faults(run_dir) if f["kind"] == "receiver lost" and f["host"] == lost_host]
    drops = _ready_drops(rows, read_jsonl(run_dir / "events.jsonl"), stepped, faults[0], len(lost))
    explained = drops.numbers["replicas_explained"]
    found = {"exactly_once": checks.exactly_once(ids, acknowledged), "no_drop_in_scale_up": drops}
    recovered = checks.recovery(faults, [s.at for s in delays], rows, "in")
    failures = [f for a in answers for f in a["failures"]]
    return {
        "scenario": "receivers",
        "seed": seed,
        "held": {k: f.held for k, f in found.items()},
        "violations": [v for f in found.values() for v in f.violations],
        "numbers": {k: f.numbers for k, f in found.items()},
        "recovery": recovered,
        "cut_after_scale_up_s": round(at - (_scale_up_at(run_dir, stepped) or at), 2),
        "receivers_lost": len(lost),
        "receivers_dropped_in_fault": explained,
        "faults_recorded": [f"{f['kind']} ({f['who']}): {f['reason']}" for f in read_faults(run_dir)],
        "called_lost_after": round(min(float(f["at"]) for f in lost) - at, 1) if lost else None,
        "peak_ready": max((int(r["replicas"]) for r in rows), default=0),
        "answered": sum(len(a["ok"]) for a in answers),
        "gave_up": sum(len(a["gave_up"]) for a in answers),
        "failed_attempts": len(failures),
        "run_dir": str(run_dir),
    }


def main(out: Path = RESULTS) -> int:
    refusal = rig_refusal("chaos-receivers")
    if refusal is not None:
        print(refusal)
        return 2
    root = Path(tempfile.mkdtemp(prefix="tidal-bench-chaos-receivers-"))
    r = run_receiver_cut(root)  # a run that fails keeps its directory, to be read
    if all(r["held"].values()):
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"kept {root}")
    rec = r["recovery"][0]
    print(f"held: {r['held']}; recovery: {rec}")
    for v in r["violations"]:
        print(f"  ✗ {v}")
    print("| scenario | all held | recovery | first delivery | backlog back | receivers called lost "
          "| ready dropped in the fault | peak ready | answered / gave up | failed attempts |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    held = "yes" if all(r["held"].values()) else "NO"
    cells = [
        f"receiver host cut, {r['cut_after_scale_up_s']} s into the scale-up", held,
        *(f"{rec[k]:.1f} s" if rec[k] is not None else "never"
          for k in ("recovery_s", "first_delivery_s", "backlog_back_s")),
        r["receivers_lost"], r["receivers_dropped_in_fault"], r["peak_ready"],
        f"{r['answered']} / {r['gave_up']}", r["failed_attempts"],
    ]  # fmt: skip
    print("| " + " | ".join(str(c) for c in cells) + " |")
    path = write_result("chaos-receivers", {k: v for k, v in r.items() if k != "run_dir"}, out)
    print(f"wrote {path}")
    return 0 if all(r["held"].values()) and not r["gave_up"] else 1
