"""Calibrate the simulator against a real run: replay its load and compare what both did.

``compare(run_dir)`` reads a finished ``tidal run`` of a pipeline whose source is a generator:
its spec (``pipeline.yaml``), the capacity each vertex showed (messages per second of busy time,
from its committed batches in the control store) and its series (``series.jsonl``: replicas and
pending per vertex, once a second). It replays the generator's load shape through the simulator
with the run's policy, in local mode's shape (``cores`` task slots shared by every vertex;
a replica ready at the next trigger, about a second), and returns both sides per vertex:
replica-seconds, peak replicas, and the drain time of each burst (the report's definition).

Run: ``python -m tidal.sim.calibrate RUN_DIR [--cores 2]``; the comparison for the demo is in
``docs/simulator.md``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidal.sim.model import VertexModel
from tidal.sim.run import simulate
from tidal.sim.traces import Trace
from tidal.spec import LoadShape, PipelineSpec, load_pipeline

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
    shape = LoadShape(g.shape, g.rate, g.peak, g.at, g.duration, g.period)
    rates = tuple(float(shape.total(i + 1) - shape.total(i)) for i in range(seconds))
    return Trace(f"{spec.name}-generator", rates, description=f"{spec.name}'s generator ({g.shape})")


def capacities(run_dir: Path) -> dict[str, float]:
    """Messages per second of busy time per vertex, over the run's committed batches."""
    with sqlite3.connect(run_dir / "pipeline.db") as db:
        rows = db.execute("SELECT vertex, SUM(rows), SUM(busy) FROM batches GROUP BY vertex").fetchall()
    return {str(v): float(n) / float(b) for v, n, b in rows if b and n}


def _drains(pending: list[float], gap: int = 5, shortest: int = 2) -> list[float]:
    """Backlog spells that drained, in seconds (as the report counts them: short zeros do not
    end a spell, short spells are not bursts, one still open at the end is left out)."""
    spells: list[list[int]] = []
    began: int | None = None
    for t, p in enumerate(pending):
        if p > 0 and began is None:
            began = t
            if spells and began - spells[-1][1] < gap:
                began = spells.pop()[0]
        elif p <= 0 and began is not None:
            spells.append([began, t])
            began = None
    return [float(b - a) for a, b in spells if b - a >= shortest]


def _real(run_dir: Path) -> dict[str, tuple[list[int], list[float]]]:
    """Per vertex: replicas and pending, one sample a second from the start of the series."""
    rows = [json.loads(line) for line in (run_dir / "series.jsonl").read_text().splitlines() if line]
    start = min(r["at"] for r in rows)
    out: dict[str, tuple[list[int], list[float]]] = {}
    for r in rows:
        reps, pend = out.setdefault(r["name"], ([], []))
        t = int(r["at"] - start)
        while len(reps) <= t:
            reps.append(reps[-1] if reps else int(r["replicas"]))
            pend.append(pend[-1] if pend else float(r["pending"] or 0))
        reps[t], pend[t] = int(r["replicas"]), float(r["pending"] or 0)
    return out


def compare(run_dir: Path, cores: int = 2, startup: float = 1.0) -> dict[str, dict[str, Any]]:
    """Real against simulated, per vertex: ``{"real": Side, "sim": Side}``."""
    spec = load_pipeline(run_dir / "pipeline.yaml")
    real = _real(run_dir)
    seconds = max(len(reps) for reps, _ in real.values())
    measured = capacities(run_dir)
    models = {v.name: VertexModel(measured.get(v.name, 4000.0), startup) for v in spec.vertices}
    policy = spec.policy
    result = simulate(spec, generator_trace(spec, seconds), policy, models, cores=cores)
    out: dict[str, dict[str, Any]] = {}
    for v in spec.vertices:
        reps, pend = real[v.name]
        sim_reps, sim_pend = result.replicas[v.name], [float(p) for p in result.pending[v.name]]
        out[v.name] = {
            "capacity": measured.get(v.name),
            "real": Side(float(sum(reps)), max(reps), _drains(pend)),
            "sim": Side(float(sum(sim_reps)), max(sim_reps), _drains(sim_pend)),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tidal.sim.calibrate", description=__doc__)
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
