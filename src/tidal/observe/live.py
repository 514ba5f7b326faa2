"""The live terminal view of a running pipeline (rich): one row per vertex.

Wide terminals get the last decision in its own column; below ``WIDE`` columns (80-column
terminals, piped output) the table keeps the numbers and each vertex's last decision follows it
on a line of its own, so nothing is squeezed into a column a word wide.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

__all__ = ["WIDE", "delay_cell", "request_line", "status_table"]

WIDE = 120  # columns from which the decision gets a column of its own


def _num(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "—" if value is None else fmt.format(value)


def status_table(statuses: Iterable[Any], title: str = "", width: int | None = None) -> RenderableType:
    """The vertices' state; ``width`` is the console's (``None``: wide)."""
    rows = list(statuses)
    wide = width is None or width >= WIDE
    table = Table(title=title, expand=False)
    columns = [
        ("vertex", "left"),
        ("kind", "left"),
        ("replicas", "right"),
        ("pending now", "right"),
        ("rate/s", "right"),
        ("buffer", "right"),
        ("processed", "right"),
    ]
    delays = any(getattr(s, "delay", None) is not None for s in rows)
    if delays:
        columns.append(("delay p50 / p99", "right"))
    if wide:
        columns.append(("last decision", "left"))
    for column, justify in columns:
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    decisions: list[Text] = []
    paths = [Text.from_markup(request_line(s.name, s.requests)) for s in rows if getattr(s, "requests", None)]
    for s in rows:
        replicas = str(s.replicas)
        if s.desired is not None and s.desired != s.replicas:
            replicas += f" → {s.desired}"
        state = "" if s.running else " [red](down)[/]"
        stuck = getattr(s, "stuck_for", None)
        if stuck:
            state += f" [bold red]STUCK {stuck:.0f} s[/]"
        dead, dropped = getattr(s, "dead", 0), getattr(s, "dropped", 0)
        drops = getattr(s, "drops", None)
        why = f" ({', '.join(f'{n:,} {reason}' for reason, n in drops.items())})" if drops else ""
        notes = [f"{dead:,} dead"] * bool(dead) + [f"{dropped:,} dropped{why}"] * bool(dropped)
        watermark = getattr(s, "watermark", None)
        notes += [f"watermark {str(watermark)[11:19]}"] * bool(watermark)  # HH:MM:SS of the ISO time
        processed = f"{s.processed:,}" + (f" ({', '.join(notes)})" if notes else "")
        cells = [
            escape(s.name) + state,
            s.kind,
            replicas,
            _num(s.pending),
            _num(s.rate, "{:,.1f}"),
            _num(s.usage, "{:.0%}"),
            processed,
        ]
        if delays:
            cells.append(delay_cell(getattr(s, "delay", None)))
        if wide:
            cells.append(f"[bold]{escape(str(s.rule))}[/] {escape(s.reason)}" if s.rule else "")
        elif s.rule:
            decisions.append(Text.assemble((s.name, "bold"), f" [{s.rule}] ", s.reason))
        table.add_row(*cells)
    if not paths and (wide or not decisions):
        return table
    return Group(table, *paths, *(decisions if not wide else []))


def delay_cell(delay: dict[str, float] | None) -> str:
    """A sink's delivery delay, source to sink, over the last seconds: ``p50 / p99``."""
    if delay is None:
        return ""
    if not delay:
        return "—"
    return f"{_seconds(delay['p50'])} / {_seconds(delay['p99'])}"


def _seconds(value: float) -> str:
    return f"{value * 1000:,.0f} ms" if value < 1 else f"{value:,.1f} s"


def request_line(name: str, r: dict[str, Any]) -> str:
    """An HTTP source's request path in one line (rich markup): where clients send, the load,
    what waits, what was refused, and whether the activator stands in the path."""
    if "at" not in r:
        return f"[bold]{escape(name)}[/] {escape(r.get('url', ''))} — no report yet"
    where = "[yellow]activator in the path[/]" if r["in_path"] else "[green]activator out of the path[/]"
    hosts = r.get("hosts")  # receivers on other hosts: how many on each
    on = f" ({', '.join(f'{h}: {n}' for h, n in hosts.items()) or 'no host'})" if hosts is not None else ""
    return (
        f"[bold]{escape(name)}[/] {escape(r['url'])} — {r['rps']:,.0f} req/s, concurrency "
        f"{r['concurrency']:.1f}, {r['held']} held, {r['ready']} receivers{escape(on)}, "
        f"{r['refused']:,} refused (503); "
        + (f"{r['unauthorized']:,} without the token (401/403); " if r.get("unauthorized") else "")
        + where
    )
