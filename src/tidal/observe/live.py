"""The live terminal view of a running pipeline (rich): one row per vertex."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.markup import escape
from rich.table import Table

__all__ = ["status_table"]


def _num(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "—" if value is None else fmt.format(value)


def status_table(statuses: Iterable[Any], title: str = "") -> Table:
    table = Table(title=title, expand=False)
    for column, justify in (
        ("vertex", "left"),
        ("kind", "left"),
        ("replicas", "right"),
        ("pending now", "right"),
        ("rate/s", "right"),
        ("buffer", "right"),
        ("processed", "right"),
        ("last decision", "left"),
    ):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for s in statuses:
        replicas = str(s.replicas)
        if s.desired is not None and s.desired != s.replicas:
            replicas += f" → {s.desired}"
        state = "" if s.running else " [red](down)[/]"
        stuck = getattr(s, "stuck_for", None)
        if stuck:
            state += f" [bold red]STUCK {stuck:.0f} s[/]"
        decision = f"[bold]{escape(str(s.rule))}[/] {escape(s.reason)}" if s.rule else ""
        table.add_row(
            s.name + state,
            s.kind,
            replicas,
            _num(s.pending),
            _num(s.rate, "{:,.1f}"),
            _num(s.usage, "{:.0%}"),
            f"{s.processed:,}",
            decision,
        )
    return table
