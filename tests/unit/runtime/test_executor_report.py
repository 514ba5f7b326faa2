"""What a run on a cluster cost, from its executors.jsonl."""

from __future__ import annotations

import json

from tidal.observe.report import summarize_executors


def test_executor_and_core_seconds_are_the_areas_under_the_counts(tmp_path):
    records = [
        {"kind": "count", "at": 100.0, "executors": 1, "cores": 2},
        {"kind": "count", "at": 110.0, "executors": 3, "cores": 6},
        {"kind": "startup", "id": "1", "registered_after": 4.0, "first_task_after": 9.0},
        {"kind": "startup", "id": "2", "registered_after": 6.0, "first_task_after": 15.0},
        {"kind": "count", "at": 130.0, "executors": 2, "cores": 4},
        {"kind": "count", "at": 140.0, "executors": 2, "cores": 4},  # the stop
    ]
    (tmp_path / "executors.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records) + '{"kind": "cou'
    )
    s = summarize_executors(tmp_path)
    assert s is not None
    assert s.executor_seconds == 1 * 10 + 3 * 20 + 2 * 10
    assert s.core_seconds == 2 * 10 + 6 * 20 + 4 * 10
    assert s.peak == 3 and s.startups == 2
    assert s.registered_median == 5.0 and s.first_task_median == 12.0 and s.first_task_max == 15.0


def test_a_local_run_has_no_executor_summary(tmp_path):
    assert summarize_executors(tmp_path) is None
