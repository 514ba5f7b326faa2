"""Calibrate the simulator against a real run: replay its load and compare what both did.

``compare(run_dir)`` reads a finished ``tidal run`` of a pipeline whose source is a generator:
its spec (``pipeline.yaml``), the capacity each vertex showed (messages per second of busy time,
from its committed batches in the control store) and its report's summary per vertex. It
replays the generator's load shape through the simulator with the run's policy, in local
mode's shape (``cores`` task slots shared by every vertex; a replica ready at the next trigger,
about a second), and returns both sides per vertex: replica-seconds, peak replicas, and the
drain time of each burst, both sides by the report's definitions (:mod:`tidal.observe.report`).
It lives with the report, not in :mod:`tidal.sim`, because it reads run directories.

Run: ``python -m tidal.observe.calibrate RUN_DIR [--cores 2]``; the comparison for the demo is
in ``docs/simulator.md``.
"""

from __future__ import annotations

import argparse
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidal.observe.report import drains, summarize
from tidal.observe.series import read_series
from tidal.sim.model import VertexModel
from tidal.sim.run import simulate
from tidal.sim.traces import Trace
from tidal.spec import PipelineSpec, load_pipeline

__all__ = ["Side", "capacities", "compare", "generator_trace"]


@dataclass(frozen=True)
class Side:
    replica_seconds: float
    peak: int
    drains: list[float]


def generator_trace(spec: PipelineSpec, seconds: int) -> Trace:
    """The load of the pipeline's (one) generator source, second by second."""
    source = next(v for v in spec.vertices if v.source is not None and v.source.generator is not None)
    assert source.source is not None and source.source.generator is not None
    g = source.source.generator
    shape = g.load_shape()
    rates = tuple(float(shape.total(i + 1) - shape.total(i)) for i in range(seconds))
    return Trace(f"{spec.name}-generator", rates, description=f"{spec.name}'s generator ({g.shape})")


def capacities(run_dir: Path) -> dict[str, float]:
    """Messages per second of busy time per vertex, over the run's committed batches."""
    with sqlite3.connect(run_dir / "pipeline.db") as db:
        rows = db.execute("SELECT vertex, SUM(rows), SUM(busy) FROM batches GROUP BY vertex").fetchall()
    return {str(v): float(n) / float(b) for v, n, b in rows if b and n}


def _side(replicas: list[int], pending: list[int]) -> Side:
    """A simulated vertex, one sample a second, summarized as the report summarizes a real one."""
    rows = [{"at": float(t), "pending": p} for t, p in enumerate(pending)]
    return Side(float(sum(replicas)), max(replicas), drains(rows))


def compare(run_dir: Path, cores: int = 2, startup: float = 1.0) -> dict[str, dict[str, Any]]:
    """Real against simulated, per vertex: ``{"real": Side, "sim": Side}``."""
    spec = load_pipeline(run_dir / "pipeline.yaml")
    real = {s.vertex: s for s in summarize(run_dir)}
    at = [row["at"] for row in read_series(run_dir)]
    seconds = int(max(at) - min(at)) + 1
    measured = capacities(run_dir)
    models = {v.name: VertexModel(measured.get(v.name, 4000.0), startup) for v in spec.vertices}
    policy = spec.policy
    result = simulate(spec, generator_trace(spec, seconds), policy, models, cores=cores)
    out: dict[str, dict[str, Any]] = {}
    for v in spec.vertices:
        r = real[v.name]
        out[v.name] = {
            "capacity": measured.get(v.name),
            "real": Side(r.replica_seconds, r.peak_replicas, r.drains),
            "sim": _side(result.replicas[v.name], result.pending[v.name]),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tidal.observe.calibrate", description=__doc__)
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--cores", type=int, default=2, help="the local[N] the run had")
    args = parser.parse_args(argv)
    print("| run | vertex | capacity /s | replica-s real / sim | peak real / sim | drains s real / sim |")
    print("|---|---|---|---|---|---|")
    for run_dir in args.run_dirs:
        for name, row in compare(run_dir, args.cores).items():
            r, s = row["real"], row["sim"]
            cap = f"{row['capacity']:,.0f}" if row["capacity"] else "–"
            real_drains = ", ".join(f"{d:g}" for d in r.drains) or "–"
            sim_drains = ", ".join(f"{d:g}" for d in s.drains) or "–"
            print(f"| {run_dir.name} | {name} | {cap} | {r.replica_seconds:g} / {s.replica_seconds:g} "
                  f"| {r.peak} / {s.peak} | {real_drains} / {sim_drains} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
