"""Benchmark: the HTTP source's request path, with a real load generator (``hey``).

Two parts (``docs/http.md`` says what each piece does):

**Overhead.** One receiver process on a SQLite buffer; each request POSTs one JSON message that
is appended before the answer. Three ways in, alternating, ``REPEATS`` times each:

- **bare**: straight to the receiver (its queue-proxy with ``containerConcurrency: 0``: no
  breaker; the per-second statistics are still kept, they cost a few µs);
- **in path**: activator (throttler, capacity accounting, statistics) → the receiver's
  queue-proxy → the handler;
- **out of path**: the receiver also listens on the public port and the activator does not
  (``SO_REUSEPORT``): the client reaches the receiver's queue-proxy directly.

Both with ``containerConcurrency`` 0 (no breaker: the handler's own cost) and 10 (at most 10
requests in the handler, a queue of 100: fewer requests share each group commit).

At a fixed ``RATE`` req/s for ``SECONDS`` s: p50/p95/p99 latency; then unlimited with
``WORKERS`` connections: req/s. ``hey`` runs on the same two cores as everything it measures.

**Burst from zero** (Knative's load test): a pipeline (HTTP source → blackhole sink, Spark
local mode) whose source starts at zero receivers; ``hey`` sends ``STEPS`` req/s for
``STEP_SECONDS`` each, back to back. Errors (non-2xx), the first second's requests p95 and max,
each step's p95, and the receivers the KPA reached.

Run: ``tidal bench http``. Numbers go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import csv
import io
import math
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tidal.bench import RESULTS, write_result

RATE = 1000
SECONDS = 10
WORKERS = 32
REPEATS = 3
STEPS = (1000, 2000, 3000)
STEP_SECONDS = 10
BODY = b'{"event":"click","page":"/home","user":42}'
PLACES = ("in path", "out of path")


@dataclass(frozen=True, slots=True)
class Sent:
    offset: float  # seconds from the load's start
    latency: float  # seconds
    status: int


def need_hey() -> str:
    found = shutil.which("hey")
    if found is None:
        raise SystemExit("tidal bench http needs the load generator hey: sudo apt-get install -y hey")
    return found


def hey(
    url: str, body: Path, seconds: float, rate: float | None = None, workers: int = WORKERS
) -> list[Sent]:
    """Run ``hey`` for ``seconds`` (at ``rate`` req/s in total, else as fast as it can)."""
    cmd = [need_hey(), "-z", f"{seconds}s", "-c", str(workers), "-m", "POST", "-T", "application/json"]
    cmd += ["-D", str(body), "-o", "csv", "-t", "30"]
    if rate is not None:
        cmd += ["-q", f"{rate / workers:g}"]
    out = subprocess.run([*cmd, url], check=True, capture_output=True, text=True, timeout=seconds + 60).stdout
    rows = csv.DictReader(io.StringIO(out))
    return [Sent(float(r["offset"]), float(r["response-time"]), int(r["status-code"])) for r in rows]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]  # nearest rank


def summary(sent: list[Sent], seconds: float) -> dict[str, float]:
    ok = [s.latency for s in sent if 200 <= s.status < 300]
    return {
        "requests": len(sent),
        "errors": len(sent) - len(ok),
        "req_per_s": len(ok) / seconds,
        "p50_ms": percentile(ok, 50) * 1000,
        "p95_ms": percentile(ok, 95) * 1000,
        "p99_ms": percentile(ok, 99) * 1000,
        "max_ms": max(ok, default=float("nan")) * 1000,
    }


def overhead(root: Path, seconds: float = SECONDS, repeats: int = REPEATS) -> dict[str, Any]:
    from tidal.isb.open import open_store
    from tidal.request.activator import ActivatorConfig
    from tidal.request.path import RequestPath
    from tidal.request.receiver import ReceiverConfig
    from tidal.scaling.limits import BufferLimits

    root.mkdir(parents=True, exist_ok=True)
    db = str(root / "bench.db")
    store = open_store("sqlite", db=db, pipeline="bench")
    store.create("out", BufferLimits(max_length=50_000_000))
    body = root / "body.json"
    body.write_bytes(BODY)
    paths = {}
    for name, cc in (("bare", 0), ("cc 0", 0), ("cc 10", 10)):
        receiver = ReceiverConfig("in", "bench", ("out",), db=db, container_concurrency=cc)
        paths[name] = RequestPath(
            ActivatorConfig("in", container_concurrency=cc), receiver, lambda: 1, root / name.replace(" ", "")
        ).start()
    variants: list[tuple[str, str, bool]] = [
        (f"{where}, {cc}", cc, where == "in path") for cc in ("cc 0", "cc 10") for where in PLACES
    ]
    runs: dict[str, list[dict[str, float]]] = {"bare": [], **{name: [] for name, _, _ in variants}}
    fastest: dict[str, list[float]] = {k: [] for k in runs}
    try:
        for name, path in paths.items():
            deadline = time.monotonic() + 120
            while path.ready() < 1:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"http overhead: no receiver of {name!r} ready within 120 s")
                time.sleep(0.1)
        bare_url = paths["bare"].receiver_urls()[0]
        for _ in range(repeats):
            for name, rows in runs.items():
                if name == "bare":
                    url = bare_url
                else:
                    _, which, in_path = next(v for v in variants if v[0] == name)
                    paths[which].set_in_path(in_path)
                    time.sleep(0.5)  # the next reconcile moves the listeners
                    url = paths[which].url
                rows.append(summary(hey(url, body, seconds, rate=RATE), seconds))
                fastest[name].append(summary(hey(url, body, seconds), seconds)["req_per_s"])
    finally:
        for path in paths.values():
            path.stop()
        store.close()
    table = {}
    for variant, rows in runs.items():
        table[variant] = {
            key: statistics.median(r[key] for r in rows) for key in ("p50_ms", "p95_ms", "p99_ms", "errors")
        }
        table[variant]["max_req_per_s"] = statistics.median(fastest[variant])
    return table


def burst_from_zero(
    root: Path, steps: tuple[int, ...] = STEPS, step_seconds: float = STEP_SECONDS
) -> dict[str, Any]:
    from tidal.spark.run.pipeline import PipelineRun
    from tidal.spec import parse_pipeline

    spec = parse_pipeline(
        {
            "name": "burst",
            "limits": {"bufferMaxLength": 1_000_000, "readBatchSize": 5000},
            "controller": {"intervalSeconds": 0.5},
            "vertices": [
                {"name": "in", "source": {"http": {}}, "replicas": 0},
                {"name": "out", "sink": {"blackhole": {}}},
            ],
            "edges": [{"from": "in", "to": "out"}],
        }
    )
    root.mkdir(parents=True, exist_ok=True)
    body = root / "body.json"
    body.write_bytes(BODY)
    run = PipelineRun(spec, root / "run").start()
    out: dict[str, Any] = {"steps": []}
    try:
        path = run.requests["in"]
        run.wait(duration=5)  # Spark's warm-up; the source stays at zero
        out["ready_before"] = path.ready()
        peak = 0
        for i, rate in enumerate(steps):
            sent = hey(path.url, body, step_seconds, rate=rate, workers=max(32, rate // 20))
            row: dict[str, Any] = {"rate": rate, **summary(sent, step_seconds), "receivers": path.ready()}
            if i == 0:
                first = [s for s in sent if s.offset < 1.0]
                row["first_second"] = summary(first, 1.0)
            out["steps"].append(row)
            peak = max(peak, path.ready())
        out["peak_receivers"] = peak
        out["accepted"] = path.accepted()
    finally:
        run.stop()
    return out


def main() -> int:
    need_hey()
    root = Path(tempfile.mkdtemp(prefix="tidal-bench-http-"))
    try:
        table = overhead(root / "overhead")
        burst = burst_from_zero(root / "burst")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    bare = table["bare"]
    print(
        f"\nrequest path at {RATE} req/s ({SECONDS} s, median of {REPEATS}); "
        f"max req/s with {WORKERS} connections"
    )
    print("| way in | p50 ms | p95 ms | p99 ms | errors | max req/s | × bare |")
    print("|---|---|---|---|---|---|---|")
    for variant, row in table.items():
        ratio = row["max_req_per_s"] / bare["max_req_per_s"]
        print(
            f"| {variant} | {row['p50_ms']:.2f} | {row['p95_ms']:.2f} | {row['p99_ms']:.2f} | "
            f"{row['errors']:.0f} | {row['max_req_per_s']:.0f} | {ratio:.2f} |"
        )
    print(f"\nburst from zero: {' → '.join(str(s) for s in STEPS)} req/s, {STEP_SECONDS} s each")
    print("| step req/s | sent | errors | p95 ms | max ms | receivers |")
    print("|---|---|---|---|---|---|")
    for row in burst["steps"]:
        print(
            f"| {row['rate']} | {row['requests']} | {row['errors']} | {row['p95_ms']:.0f} | "
            f"{row['max_ms']:.0f} | {row['receivers']} |"
        )
    first = burst["steps"][0]["first_second"]
    print(
        f"first second: {first['requests']} requests, p95 {first['p95_ms']:.0f} ms, "
        f"max {first['max_ms']:.0f} ms"
    )
    path = write_result(
        "http",
        {"at": datetime.now().isoformat(timespec="seconds"), "overhead": table, "burst": burst},
        RESULTS,
    )
    print(f"results: {path}")
    return 0
