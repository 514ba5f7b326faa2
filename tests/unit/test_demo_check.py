"""``tidal demo``'s last lines: what was archived, and what still waited when the drain was cut short."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from tidal.cli import demo


def run_dir(tmp_path: Path, ids: list[int], state: str, pending: dict[str, float | None]) -> Path:
    (tmp_path / "orders.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    kinds = {"orders": "source", "enrich": "udf", "archive": "sink"}
    vertices = [{"name": n, "kind": kinds[n], "pending": p} for n, p in pending.items()]
    (tmp_path / "status.json").write_text(json.dumps({"state": state, "vertices": vertices}))
    return tmp_path


def check(where: Path) -> tuple[int, str]:
    console = Console(record=True, width=200)
    return demo._check(where, console), console.export_text()


def test_orders_left_in_the_buffers_are_counted_and_the_way_to_resume_them_named(tmp_path: Path) -> None:
    where = run_dir(tmp_path, [1, 2, 3], "stopped", {"orders": 9_000.0, "enrich": 1_108.0, "archive": None})
    code, text = check(where)
    assert code == 0 and "3 orders archived, each exactly once" in text
    # the source's own count (what its generator had not sent) is not waiting in a buffer
    assert "1,108 orders still wait in the buffers" in text and f"--run-dir {where}" in text


def test_a_drained_run_says_nothing_of_waiting_and_duplicates_fail(tmp_path: Path) -> None:
    code, text = check(
        run_dir(tmp_path, [1, 2, 3], "stopped", {"orders": 0.0, "enrich": 0.0, "archive": None})
    )
    assert code == 0 and "still wait" not in text
    code, text = check(run_dir(tmp_path, [1, 2, 2], "stopped", {"enrich": 0.0}))
    assert code == 1 and "DUPLICATES FOUND" in text


def test_a_status_that_is_not_final_counts_nothing_as_waiting(tmp_path: Path) -> None:
    code, text = check(run_dir(tmp_path, [1], "running", {"enrich": 500.0}))
    assert code == 0 and "still wait" not in text
