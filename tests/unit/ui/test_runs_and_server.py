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
