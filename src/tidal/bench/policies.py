"""Benchmark: the demo's wave pipeline on real Spark under ``policy: numaflow`` and ``policy: tidal``.

The wave pipeline (``tidal/examples/wave.yaml``: 40 s of orders every 110 s, ``enrich`` waiting
2 ms on a lookup per order) runs with its waves at ``PEAK`` orders/s for ``DURATION`` seconds
(two waves and the drain of the second) with ``tidal run``, once under each policy,
alternating, ``ROUNDS`` times.

``PEAK`` is 1,800/s, twice the demo's: at the demo's 900/s both policies keep up once scaled,
so no backlog outlives a wave and there is no drain for a policy to shorten (measured: the
tail was 0 s in all eight waves, 2026-11-23). At 1,800/s ``enrich`` at its ``max: 6`` is
about what the wave needs, so how soon the replicas come decides how long the backlog stays.

Spark runs in local mode with a task slot for every replica the spec allows (``MASTER``,
``local[12]``: 3 + 6 + 3), as the demo does with ``local[6]``: ``enrich`` waits rather than
computes, so its replicas run side by side and each adds capacity even on a 2-core machine. On
``local[2]`` the slots, not the policy, bound the drain (both policies drained in ~52 s there).

Reported per policy:
- the drain of each wave at ``enrich`` (from its backlog appearing to the backlog back at zero,
  the report's ``drains``) and its **tail**, the drain less the wave's own 40 s of arrivals:
  how long the backlog outlived the wave, the part a policy can shorten;
- the p99 and max source-to-sink delay of every delivered order (``archive``'s commits);
- the replica-seconds of all vertices and of ``enrich``, and the orders delivered.

Three settings (:data:`SETTINGS`), each its own command:
- ``tidal bench policies``: the demo's spec at 1,800/s in local mode, as above;
- ``tidal bench policies-defaults``: the same with the scale blocks cut to ``min`` and ``max``,
  so Numaflow runs on its own defaults (120 s lookback, 90 s cooldowns, target 20 s) where the
  demo shortens them to fit a cycle into 2.5 minutes;
- ``tidal bench policies-cluster``: the demo's 900/s on a standalone cluster of four 2-core
  workers on 127.0.0.1, where replicas become executors; executor-seconds too (one round).

Numbers go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import dataclasses
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tidal.bench import RESULTS, write_result

DURATION = 240.0
ROUNDS = 2
MASTER = "local[12]"  # a slot per replica the wave spec allows (3 + 6 + 3)
PEAK = 1800  # orders/s during a wave


@dataclass(frozen=True)
class Setting:
    """Where and how the waves run: one per ``tidal bench policies*`` command."""

    name: str
    peak: int = PEAK
    master: str | None = MASTER  # Spark local mode, or None with ``cluster``
    cluster: str | None = None  # ``--cluster local:NxC``: a standalone cluster, replicas on executors
    numaflow_defaults: bool = False  # the scale blocks keep only min and max
    # The jobs compared, alternating: (label, policy, chained). Unchained: chain: false on every
    # edge, each vertex its own query (the demo chains enrich and archive, tidal.spec.chains).
    variants: tuple[tuple[str, str, bool], ...] = (("numaflow", "numaflow", True), ("tidal", "tidal", True))


SETTINGS = {
    "policies": Setting("policies"),
    # Numaflow on its own windows and cooldowns (120 s lookback, 90 s cooldowns, target 20 s).
    "policies-defaults": Setting("policies-defaults", numaflow_defaults=True),
    # Four 2-core workers, executors following Σ replicas (the wave spec's 1..4 two-core
    # executors); the demo's 900/s, as `tidal bench cluster`: 4 executor JVMs, the driver and
    # the Python workers share the 2-core box, and at 1,800/s the slots, not a policy, bind.
    "policies-cluster": Setting("policies-cluster", peak=900, master=None, cluster="local:4x2"),
    # The default policy with the demo's chain (enrich and archive in one query) and without.
    "policies-chaining": Setting(
        "policies-chaining",
        variants=(("chained", "numaflow", True), ("unchained", "numaflow", False)),
    ),
}


def wave_spec(
    root: Path, policy: str, peak: int = PEAK, numaflow_defaults: bool = False, chained: bool = True
) -> Path:
    """The demo's wave spec under ``policy`` at ``peak`` orders/s; with ``numaflow_defaults``, its
    scale blocks keep only ``min`` and ``max`` (Numaflow's own windows, cooldowns and target);
    ``chained=False`` puts ``chain: false`` on every edge."""
    import tidal.examples

    spec = yaml.safe_load((Path(tidal.examples.__file__).parent / "wave.yaml").read_text())
    spec["policy"] = policy
    next(v for v in spec["vertices"] if "source" in v)["source"]["generator"]["peak"] = peak
    if numaflow_defaults:
        for vertex in spec["vertices"]:
            vertex["scale"] = {k: v for k, v in vertex.get("scale", {}).items() if k in ("min", "max")}
    if not chained:
        for edge in spec["edges"]:
            edge["chain"] = False
    path = root / f"wave-{policy}{'' if chained else '-unchained'}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def wave_seconds(spec_path: Path) -> float:
    """Seconds of arrivals per wave: the generator's ``duration`` in the spec the run had."""
    spec = yaml.safe_load(spec_path.read_text())
    return float(next(v["source"]["generator"]["duration"] for v in spec["vertices"] if "source" in v))


def run_wave(
    root: Path,
    policy: str,
    n: int,
    duration: float = DURATION,
    setting: Setting = SETTINGS["policies"],
    chained: bool = True,
) -> dict[str, Any]:
    from tidal.observe.latency import read_delays
    from tidal.observe.report import summarize, summarize_executors
    from tidal.scaling.latency import quantile

    run_dir = root / f"{policy}{'' if chained else '-unchained'}-{n}"
    spec = wave_spec(root, policy, setting.peak, setting.numaflow_defaults, chained)
    where = ["--cluster", setting.cluster] if setting.cluster else ["--master", setting.master or MASTER]
    proc = subprocess.run(
        [sys.executable, "-m", "tidal", "run", str(spec), "--run-dir", str(run_dir), *where,
         "--duration", str(duration), "--no-metrics", "--no-live"],
        check=False, capture_output=True, text=True, timeout=duration + 300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"the {policy} wave run failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    executors = summarize_executors(run_dir) if setting.cluster else None
    vertices = {s.vertex: s for s in summarize(run_dir)}
    delays = read_delays(run_dir).get("archive", [])
    drains = vertices["enrich"].drains
    wave = wave_seconds(run_dir / "pipeline.yaml")
    return {
        "drains": drains,
        "tails": [round(max(0.0, d - wave), 1) for d in drains],
        "p99_delay": round(quantile(delays, 0.99), 2),
        "max_delay": round(quantile(delays, 1.0), 2),
        "replica_seconds": round(sum(s.replica_seconds for s in vertices.values()), 1),
        "enrich_replica_seconds": vertices["enrich"].replica_seconds,
        "delivered": vertices["archive"].processed,
        "executor_seconds": None if executors is None else executors.executor_seconds,
    }


def main_numaflow_defaults(out: Path = RESULTS, rounds: int = ROUNDS) -> int:
    """``tidal bench policies-defaults``: the same waves with Numaflow's default scale settings
    (lookback 120 s, cooldowns 90 s, target 20 s) where the demo shortens them."""
    return main(out, rounds, SETTINGS["policies-defaults"])


def main_cluster(out: Path = RESULTS, rounds: int = 1) -> int:
    """``tidal bench policies-cluster``: the demo's waves on a standalone cluster on 127.0.0.1,
    replicas on executors; executor-seconds besides replica-seconds."""
    return main(out, rounds, SETTINGS["policies-cluster"])


def main_chaining(out: Path = RESULTS, rounds: int = ROUNDS) -> int:
    """``tidal bench policies-chaining``: the waves under ``numaflow`` (the default when measured),
    the demo's chain of enrich and archive against every vertex its own query."""
    return main(out, rounds, SETTINGS["policies-chaining"])


def main(out: Path = RESULTS, rounds: int = ROUNDS, setting: Setting = SETTINGS["policies"]) -> int:
    """``tidal bench policies``: the waves under each variant, alternating, ``rounds`` times."""
    root = Path(tempfile.mkdtemp(prefix=f"tidal-bench-{setting.name}-"))
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in setting.variants}
    for n in range(rounds):  # alternate, so drift on a shared machine hits both
        for label, policy, chained in setting.variants:
            runs[label].append(run_wave(root, policy, n, setting=setting, chained=chained))
            r = runs[label][-1]
            print(f"round {n + 1} {label}: drains {r['drains']} s, p99 delay {r['p99_delay']} s, "
                  f"{r['replica_seconds']:g} replica-s, executor-s {r['executor_seconds']}, "
                  f"{r['delivered']:,} delivered")  # fmt: skip
    print()
    print("| job | enrich drain per wave s | tail after the wave s | median tail s | p99 delay s "
          "| max delay s | replica-s | enrich replica-s | delivered |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    summary: dict[str, dict[str, float]] = {}
    for policy, rs in runs.items():
        drains = [d for r in rs for d in r["drains"]]
        tails = [t for r in rs for t in r["tails"]]
        summary[policy] = {
            "drain": statistics.median(drains) if drains else float("nan"),
            "tail": statistics.median(tails) if tails else float("nan"),
            "p99_delay": statistics.median(r["p99_delay"] for r in rs),
            "replica_seconds": statistics.median(r["replica_seconds"] for r in rs),
        }
        if setting.cluster:
            summary[policy]["executor_seconds"] = statistics.median(r["executor_seconds"] for r in rs)
        waves = "; ".join(", ".join(f"{d:g}" for d in r["drains"]) for r in rs)
        tail = "; ".join(", ".join(f"{d:g}" for d in r["tails"]) for r in rs)
        delays = ", ".join(f"{r['p99_delay']:g}" for r in rs)
        worst = ", ".join(f"{r['max_delay']:g}" for r in rs)
        delivered = ", ".join(f"{r['delivered']:,}" for r in rs)
        enrich = statistics.median(r["enrich_replica_seconds"] for r in rs)
        print(f"| {policy} | {waves} | {tail} | {summary[policy]['tail']:g} | {delays} | {worst} "
              f"| {summary[policy]['replica_seconds']:g} | {enrich:g} | {delivered} |")  # fmt: skip
    (base, _, _), (other, _, _) = setting.variants[:2]
    t, nf = summary[other], summary[base]

    def ratio(key: str) -> str:
        return f"{t[key] / nf[key]:.2f}×" if nf[key] else "–"

    print(f"\n{other} / {base}: drain {ratio('drain')}, tail {ratio('tail')}, "
          f"p99 delay {ratio('p99_delay')}, replica-seconds {ratio('replica_seconds')}"
          + (f", executor-seconds {ratio('executor_seconds')}" if setting.cluster else ""))  # fmt: skip
    result = {"setting": dataclasses.asdict(setting), "runs": runs, "summary": summary}
    path = write_result(setting.name, result, out)
    print(f"wrote {path}")
    return 0
