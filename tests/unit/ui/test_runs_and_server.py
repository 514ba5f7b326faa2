"""The dashboard's reading of run directories and its HTTP routes, without a browser."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from tidal.ui.runs import RunReader, Tail
from tidal.ui.server import Dashboard


def test_a_tail_returns_complete_lines_once_and_counts_damaged_ones(tmp_path):
    path = tmp_path / "events.jsonl"
    tail = Tail(path)
    assert tail.read() == []  # no file yet
    path.write_text('{"a": 1}\nnot json\n{"b": 2')  # a damaged line and a half-written one
    assert tail.read() == [{"a": 1}] and tail.bad == 1
    with path.open("a") as f:
        f.write("}\n")
    assert tail.read() == [{"b": 2}]
    assert tail.read() == []


def test_a_missing_or_damaged_run_is_an_error_value(tmp_path):
    assert "does not exist" in RunReader(tmp_path / "gone").graph()["error"]
    (tmp_path / "run").mkdir()
    assert "pipeline.yaml is missing" in RunReader(tmp_path / "run").graph()["error"]
    (tmp_path / "run" / "pipeline.yaml").write_text("name: [")
    assert "cannot be read" in RunReader(tmp_path / "run").graph()["error"]
    (tmp_path / "run" / "status.json").write_text("{half")
    assert "damaged" in RunReader(tmp_path / "run").status()["error"]


def test_routes_serve_the_page_a_snapshot_and_json_errors(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "pipeline.yaml").write_text(
        "name: p\nvertices:\n  - {name: a, source: {generator: {}}}\n  - {name: b, sink: {log: {}}}\n"
        "edges: [{from: a, to: b}]\n"
    )
    (run / "events.jsonl").write_text(json.dumps({"vertex": "b", "at": 1.0, "rule": "steady"}) + "\n")
    dashboard = Dashboard([run]).start(0)
    try:
        page = urllib.request.urlopen(dashboard.url, timeout=5).read().decode()
        assert "/static/app.js" in page and "cdn" not in page.lower()
        runs = json.loads(urllib.request.urlopen(dashboard.url + "api/runs", timeout=5).read())
        assert runs == [{"id": 0, "run": "run", "path": str(run)}]
        snap = json.loads(urllib.request.urlopen(dashboard.url + "api/runs/0", timeout=5).read())
        assert [v["name"] for v in snap["graph"]["vertices"]] == ["a", "b"]
        assert snap["events"][0]["rule"] == "steady" and "error" in snap["status"]
        try:
            urllib.request.urlopen(dashboard.url + "api/runs/7", timeout=5)
            raise AssertionError("expected a 404")
        except urllib.error.HTTPError as exc:
            assert exc.code == 404 and "no run" in json.loads(exc.read())["error"]
        assert dashboard.url.startswith("http://127.0.0.1:")
    finally:
        dashboard.stop()


def _run_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "pipeline.yaml").write_text(
        "name: p\nvertices:\n  - {name: a, source: {generator: {}}}\n  - {name: b, sink: {log: {}}}\n"
        "edges: [{from: a, to: b}]\n"
    )
    return run


def test_faults_of_both_files_come_in_the_snapshot_then_as_updates(tmp_path):
    from tidal.controller.faults import FaultLog

    run = _run_dir(tmp_path)
    faults = FaultLog(run / "faults.jsonl")
    faults.record("receiver lost", "a", "pid 7 on 10.0.0.2:8080: SIGKILL", at=5.0, host="10.0.0.2")
    executors = run / "executors.jsonl"
    lines = [
        {"kind": "count", "at": 1.0, "executors": 2, "cores": 2},
        {"kind": "lost", "at": 3.0, "id": "4", "host": "w2", "reason": "Executor heartbeat timed out"},
    ]
    executors.write_text("".join(json.dumps(x) + "\n" for x in lines))
    reader = RunReader(run)
    snap = reader.snapshot()
    # In time order, an executor lost told as a fault with its cause; the counts are not faults.
    assert [(f["at"], f["kind"], f["who"]) for f in snap["faults"]] == [
        (3.0, "executor lost", "(executors)"),
        (5.0, "receiver lost", "a"),
    ]
    assert snap["faults"][0]["reason"] == "executor 4 on w2: Executor heartbeat timed out"
    assert snap["faults"][1]["host"] == "10.0.0.2"  # a fault's own fields reach the page
    assert reader.updates() is None  # nothing new (and no status.json to change)
    faults.record("injected: outage", "(bench)", "the driver host's link down 30 s", at=9.0, lifted=39.0)
    update = reader.updates()
    assert update is not None and [f["kind"] for f in update["faults"]] == ["injected: outage"]
    assert update["faults"][0]["lifted"] == 39.0
    assert reader.updates() is None


def test_a_fault_line_a_kill_cut_short_is_skipped_and_the_next_one_read(tmp_path):
    from tidal.controller.faults import FaultLog, read_faults

    run = _run_dir(tmp_path)
    path = run / "faults.jsonl"
    whole = {"at": 1.0, "kind": "buffer server silent", "who": "(buffers)", "reason": "n2", "server": "n2"}
    path.write_text(json.dumps(whole) + "\n" + '{"at": 2.0, "kind": "rece')  # the writer was killed
    reader = RunReader(run)
    assert [f["at"] for f in reader.snapshot()["faults"]] == [1.0]  # the cut line waits, unread
    # The run started again appends after the cut line: the new fault stays a line of its own.
    FaultLog(path).record("buffer server back", "(buffers)", "n2 again", at=3.0, server="n2")
    update = reader.updates()
    assert update is not None and [f["at"] for f in update["faults"]] == [3.0]
    assert reader.faults.bad == 1  # the cut line and its tail: one damaged line, skipped
    assert [f["at"] for f in RunReader(run).snapshot()["faults"]] == [1.0, 3.0]
    assert [f["at"] for f in read_faults(run)] == [1.0, 3.0]  # tidal events reads the same


def test_the_snapshot_route_carries_the_faults(tmp_path):
    run = _run_dir(tmp_path)
    (run / "faults.jsonl").write_text(json.dumps({"at": 1.0, "kind": "x", "who": "a", "reason": "y"}) + "\n")
    dashboard = Dashboard([run]).start(0)
    try:
        snap = json.loads(urllib.request.urlopen(dashboard.url + "api/runs/0", timeout=5).read())
        assert snap["faults"] == [{"at": 1.0, "kind": "x", "who": "a", "reason": "y"}]
    finally:
        dashboard.stop()
