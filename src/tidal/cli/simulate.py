"""``tidal simulate``: one trace through one policy (or all of them) in the simulator.

Prints the scores, and writes to ``--out``: ``scores.json``, a PNG per policy (load, replicas
against the oracle, pending), and ``changes.jsonl`` with every scaling change, its rule, inputs
and reason ("why did it scale?"), one JSON object per line with a ``policy`` field.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tidal import errors
from tidal.sim import (
    DEFAULT_BATCH_SECONDS,
    POLICIES,
    VertexModel,
    default_models,
    make_trace,
    reference_pipeline,
    score,
    simulate,
)
from tidal.sim.plot import plot_run
from tidal.spec import load_pipeline

__all__ = ["parse_capacities", "run_simulation"]


def parse_capacities(items: list[str], startup: float) -> dict[str, VertexModel]:
    """``["work=300", …]`` → a model per named vertex; a clear error for anything else."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            capacity = float(value)
        except ValueError:
            capacity = -1.0
        if not sep or not name or capacity <= 0:
            raise errors.SpecError(
                "--capacity", f"{item!r}: expected VERTEX=MESSAGES_PER_SECOND", "e.g. work=250"
            )
        out[name] = VertexModel(capacity, startup)
    return out


def run_simulation(
    pipeline: str | None,
    trace_name: str,
    policy: str,
    *,
    seed: int = 0,
    capacities: list[str] | None = None,
    startup: float = 8.0,
    out: str | Path | None = None,
) -> int:
    console = Console()
    try:
        spec = load_pipeline(pipeline) if pipeline else reference_pipeline()
        trace = make_trace(trace_name, seed)
        models = default_models(spec, parse_capacities(capacities or [], startup), startup)
    except errors.SpecError as exc:
        console.print(f"[red]invalid pipeline:[/] {exc}")
        return 2
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        return 2
    policies = list(POLICIES) if policy == "all" else [policy]
    out_dir = Path(out or Path("simulations") / f"{trace.name}-{policy}")
    out_dir.mkdir(parents=True, exist_ok=True)
    table = Table(title=f"{spec.name} on {trace.name} (seed {seed}): {trace.description}")
    columns = ("policy", "behind", "p50 s", "p99 s", "cost", "acts", "up s", "settle", "changes", "cold s")
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    scores = []
    with (out_dir / "changes.jsonl").open("w") as changes:
        for name in policies:
            result = simulate(spec, trace, name, models)
            s = score(result)
            scores.append(s.to_dict())
            plot_run(result, out_dir / f"{name}.png")
            for d in result.changes:
                changes.write(json.dumps({**d.to_dict(), "policy": name}, default=str) + "\n")

            def fmt(x: float | None, spec_: str = ".1f") -> str:
                return "–" if x is None else format(x, spec_)

            table.add_row(
                name,
                f"{s.behind:.0%}",
                fmt(s.p50_delay),
                fmt(s.p99_delay),
                fmt(s.cost, ".2f"),
                str(s.actions),
                fmt(s.first_scale_up),
                fmt(s.settle_decisions, ".0f"),
                "–" if s.settle_changes is None else str(s.settle_changes),
                fmt(s.cold_start),
            )
    (out_dir / "scores.json").write_text(json.dumps(scores, indent=2) + "\n")
    console.print(table)
    size = spec.limits.read_batch_size
    console.print(
        "models: "
        + ", ".join(
            f"{v} {m.capacity:g}/s working, {m.sustained(size):.0f}/s sustained" for v, m in models.items()
        )
        + f" per replica (micro-batches of {size}, {DEFAULT_BATCH_SECONDS:g} s fixed cost)"
    )
    console.print(f"wrote {out_dir}/: scores.json, changes.jsonl, " + ", ".join(f"{p}.png" for p in policies))
    return 0
