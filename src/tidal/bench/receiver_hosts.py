"""``tidal bench receivers``: an HTTP source whose receivers run on two hosts; one is lost under load.

Hosts of the rig (tidal.rig): ``driver`` runs the pipeline (the activator on loopback, Spark in
local mode), ``n1``–``n3`` a JetStream cluster (buffers with 3 replicas), ``r1`` and ``r2`` a
receiver agent each (``tidal agent``, ``source.http.receiverHosts``). A client on the driver's
host sends ``REQUESTS`` requests of ``BATCH`` messages at ``RATE`` requests/s over 8 connections,
each with its ``Idempotency-Key``, and retries a non-2xx answer or a broken connection with the
same key every 0.2 s, as ``docs/http.md`` tells clients to (:mod:`tidal.bench.retrying_client`).
Once a fifth are answered, ``r2`` is lost: its link down, then every process on it SIGKILLed (a
dead machine answers nothing, not even a reset, so nothing fails fast).

Measured: every acknowledged message delivered exactly once (or not); the client's failed
attempts by kind and the window they fell in (what a client sees of the loss); the slowest
request, retries included; the seconds from the loss to the run calling the host lost (an event
in ``tidal events``) and to two receivers ready again, both on ``r1``. :func:`run_receiver_loss`
is also the integration test's scenario (tests/integration/test_receiver_hosts.py). Root only.
"""

from __future__ import annotations

import json
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
from tidal.controller.faults import read_faults

__all__ = ["main", "run_receiver_loss"]

REQUESTS, RATE, BATCH = 1500, 100.0, 10
AGENT_PORT = 7171
PIPELINE = """
name: front
controller: {{intervalSeconds: 0.5}}
buffers: {{backend: jetstream, url: "{url}", replicas: 3}}
vertices:
  - name: in
    source: {{http: {{containerConcurrency: 4, receiverHosts: [{agents}], agentToken: {{file: "{token}"}}}}}}
    replicas: 2
    kpa: {{min-scale: 2, target: 4, window: 6s}}
  - name: out
    sink: {{file: {{path: out.jsonl}}}}
edges:
  - {{from: in, to: out}}
"""


def _wait(what: str, condition: Any, timeout: float, proc: subprocess.Popen[Any], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"no {what} within {timeout:g} s (see {log}):\n{tail}")
        time.sleep(0.3)


def _series(run_dir: Path, name: str) -> list[dict[str, Any]]:
    """The series' records; a last line still being written is not one yet."""
    path = run_dir / name
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def run_receiver_loss(
    root: Path, requests: int = REQUESTS, rate: float = RATE, batch: int = BATCH
) -> dict[str, Any]:
    """The scenario once; what it measured, the ids acknowledged and delivered, the run's dir."""
    from tidal.rig import Rig
    from tidal.rig.nats_cluster import start_nats_cluster

    rig = Rig(["driver", "n1", "n2", "n3", "r1", "r2"])
    with rig:
        url = start_nats_cluster([rig["n1"], rig["n2"], rig["n3"]], root / "nats", probe_from=rig["driver"])
        token = root / "agent.token"  # the agents require it (tidal agent --token-file)
        token.write_text("bench-agent-token\n")
        token.chmod(0o600)
        agents = []
        for name in ("r1", "r2"):
            address = f"{rig[name].address}:{AGENT_PORT}"
            log = root / f"agent-{name}.out"
            with log.open("w") as out:
                agent = [sys.executable, "-m", "tidal", "agent", "--listen", address,
                         "--log-dir", str(root / f"agent-{name}"), "--token-file", str(token)]  # fmt: skip
                rig[name].popen(agent, stdout=out, stderr=subprocess.STDOUT)
            agents.append((address, log))
        spec = root / "front.yaml"
        spec.write_text(PIPELINE.format(url=url, agents=", ".join(f'"{a}"' for a, _ in agents), token=token))
        run_dir, run_log = root / "run", root / "run.out"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, "-m", "tidal", "run", str(spec), "--run-dir", str(run_dir),
                   "--no-metrics", "--no-live"]  # fmt: skip
        for _, log in agents:  # each agent says where it listens once it does
            deadline = time.monotonic() + 60
            while "tidal agent on" not in (log.read_text() if log.exists() else ""):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"an agent did not start: {log.read_text()}")
                time.sleep(0.2)
        with run_log.open("w") as out:
            proc = rig["driver"].popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:

            def ready() -> bool:
                samples = _series(run_dir, "requests.jsonl")
                return bool(samples) and samples[-1].get("ready", 0) >= 2

            _wait("two ready receivers", ready, 180, proc, run_log)
            public = (run_dir / "in.url").read_text().strip()
            progress, answers = root / "client.progress", root / "client.json"
            client = rig["driver"].popen(
                [sys.executable, "-m", "tidal.bench.retrying_client", public, str(requests), str(rate),
                 str(batch), str(progress), str(answers)],
                stdout=subprocess.DEVNULL, stderr=(root / "client.err").open("w"),
            )  # fmt: skip

            def answered() -> bool:
                return progress.exists() and int(progress.read_text() or 0) >= requests // 5

            _wait("fifth of the requests answered", answered, 120, proc, run_log)
            lost_at = time.time()
            rig["r2"].link(False)  # first: a killed process's kernel would still send resets
            rig["r2"].kill()
            client.wait(timeout=900)
            result = json.loads(answers.read_text())
            acknowledged = {f"k-{i}/{j}" for i in result["ok"] for j in range(batch)}
            sink = run_dir / "out.jsonl"

            def recovered() -> bool:
                """Every acknowledged message delivered, and the run saw the loss and is back to
                two ready receivers: what the report measures, so the run must not stop before."""
                if not acknowledged <= set(delivered_ids(sink)):
                    return False
                faults = read_faults(run_dir)
                lost_host = rig["r2"].address
                lost = [f["at"] for f in faults if f["kind"] == "receiver lost" and f["host"] == lost_host]
                samples = _series(run_dir, "requests.jsonl")
                return bool(lost) and any(s["at"] > min(lost) and s.get("ready", 0) >= 2 for s in samples)

            what = "every acknowledged message, and two ready receivers after the loss"
            _wait(what, recovered, 300, proc, run_log)
            time.sleep(2)  # anything doubled would show up now
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=180)
        delivered = delivered_ids(sink)
    lost_host = rig["r2"].address
    ended = [f for f in read_faults(run_dir) if f["kind"] == "receiver lost" and f["host"] == lost_host]
    called = min((e["at"] for e in ended), default=None)
    samples = _series(run_dir, "requests.jsonl")
    back = [s["at"] for s in samples if called and s["at"] > called and s["ready"] >= 2]
    failures = result["failures"]
    kinds: dict[str, int] = {}
    for _, kind in failures:
        kinds[kind] = kinds.get(kind, 0) + 1
    return {
        "requests": requests,
        "answered": len(result["ok"]),
        "gave_up": len(result["gave_up"]),
        "exactly_once": len(delivered) == len(set(delivered)) and acknowledged <= set(delivered),
        "delivered": len(delivered),
        "acknowledged": len(acknowledged),
        "failed_attempts": kinds,
        "failure_window": round(failures[-1][0] - failures[0][0], 1) if failures else 0.0,
        "first_failure_after_loss": round(failures[0][0] - lost_at, 1) if failures else None,
        "slowest_request": round(result["slowest"], 1),
        "called_lost_after": round(called - lost_at, 1) if called else None,
        "ready_again_after": round(back[0] - lost_at, 1) if back else None,
        "lost_host": rig["r2"].address,
        "kept_host": rig["r1"].address,
        "run_dir": str(run_dir),
        "ids": delivered,
        "expected": sorted(acknowledged),
    }


def main(out: Path = RESULTS) -> int:
    refusal = rig_refusal("receivers")
    if refusal is not None:
        print(refusal)
        return 2
    root = Path(tempfile.mkdtemp(prefix="tidal-bench-receivers-"))
    try:
        r = run_receiver_loss(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    row = {k: v for k, v in r.items() if k not in ("ids", "expected", "run_dir")}
    print(f"| {REQUESTS} requests × {BATCH} msgs at {RATE:g}/s, r2 lost | once | failed attempts | window "
          "| slowest request | called lost | ready again |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    print(f"| {r['answered']} answered, {r['gave_up']} gave up | {'yes' if r['exactly_once'] else 'NO'} "
          f"| {r['failed_attempts']} | {r['failure_window']} s | {r['slowest_request']} s "
          f"| {r['called_lost_after']} s | {r['ready_again_after']} s |")  # fmt: skip
    path = write_result("receivers", row, out)
    print(f"wrote {path}")
    return 0 if r["exactly_once"] and not r["gave_up"] else 1
