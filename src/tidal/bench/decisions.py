"""Benchmark: decision quality of every policy on every trace, in the simulator.

Replays each trace of :data:`tidal.sim.TRACES` (seed 0) through the reference pipeline
(:func:`tidal.sim.reference_pipeline`) under each policy of :data:`tidal.sim.POLICIES`, with the
real controller and scaling code, and scores them (:mod:`tidal.sim.scores`). Writes
``runs/bench/decisions.json``, ``decisions.md`` (the table published in
``docs/benchmarks.md``) and a PNG per trace comparing the policies under
``runs/bench/decisions/``. Simulated time costs no wall time: the whole matrix runs in
seconds.

Run: ``tidal bench decisions``.
"""

from __future__ import annotations

import time
from pathlib import Path

from tidal.bench import RESULTS, write_result
from tidal.sim import POLICIES, TRACES, Scores, make_trace, reference_pipeline, score, simulate
from tidal.sim.plot import plot_comparison

COLUMNS = (
    ("policy", "policy"),
    ("behind", "time behind"),
    ("p50_delay", "p50 delay s"),
    ("p99_delay", "p99 delay s"),
    ("cost", "replica-s / oracle"),
    ("actions", "actions"),
    ("first_scale_up", "first scale-up s"),
    ("settle_decisions", "decisions to settle"),
    ("cold_start", "cold start s"),
)


def _cell(key: str, value: object) -> str:
    if value is None:
        return "–"
    if key == "behind":
        return f"{value:.0%}"
    if key == "cost":
        return f"{value:.2f}×"
    if isinstance(value, float):
        return f"{value:.0f}" if value >= 10 else f"{value:.1f}"
    return str(value)


def table(scores: list[Scores]) -> str:
    """The Markdown tables, one per trace, a row per policy."""
    lines: list[str] = []
    traces = list(dict.fromkeys(s.trace for s in scores))
    for trace in traces:
        lines += [f"**{trace}**", "", "| " + " | ".join(h for _, h in COLUMNS) + " |"]
        lines.append("|" + "---|" * len(COLUMNS))
        for s in scores:
            if s.trace == trace:
                row = s.to_dict()
                lines.append("| " + " | ".join(_cell(k, row[k]) for k, _ in COLUMNS) + " |")
        lines.append("")
    return "\n".join(lines)


def run(out: Path = RESULTS, seed: int = 0) -> tuple[list[Scores], float]:
    spec = reference_pipeline()
    started = time.perf_counter()
    scores = []
    for name in TRACES:
        trace = make_trace(name, seed)
        results = [simulate(spec, trace, policy) for policy in POLICIES]
        scores += [score(r) for r in results]
        plot_comparison(results, out / "decisions" / f"{name}.png")
    return scores, time.perf_counter() - started


def main(out: Path = RESULTS) -> int:
    scores, seconds = run(out)
    md = table(scores)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decisions.md").write_text(md + "\n")
    path = write_result("decisions", {"seconds": seconds, "scores": [s.to_dict() for s in scores]}, out)
    print(md)
    print(
        f"{len(scores)} simulations in {seconds:.1f} s; "
        f"wrote {path}, {out / 'decisions.md'}, {out / 'decisions'}/"
    )
    return 0
