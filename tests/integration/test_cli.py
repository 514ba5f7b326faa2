"""The ``tidal`` command end to end, each in a subprocess: run, events, status, --dry-run,
the metrics endpoint scraped over HTTP, the report, and a SIGKILL mid-run then a restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tidal.isb.control import ControlStore

from .waits import eventually, wait_for

pytestmark = pytest.mark.spark

PIPELINE = """
name: cli
limits: {{readBatchSize: 500}}
controller: {{intervalSeconds: 0.5}}
vertices:
  - name: gen
    source:
      generator: {{rate: {rate}, maxMessages: {total}, msgSize: 30}}
  - name: work
    udf: {{map: "tidal.examples.udfs:upper"}}
    scale: {{lookbackSeconds: 3, scaleUpCooldownSeconds: 1, scaleDownCooldownSeconds: 2, max: 4}}
  - name: out
    sink: {{file: {{path: out.jsonl}}}}
edges:
  - {{from: gen, to: work, chain: false}}   # work scales on its own buffer; out runs in work's query
  - {{from: work, to: out}}
"""


def tidal(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tidal", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        **kw,
    )


def output(*args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "tidal", *args], check=False, capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stdout + done.stderr


def lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["id"] for line in path.read_text().splitlines() if line.endswith("}")]


def metrics_port(run_dir: Path) -> int:
    """The port ``tidal run`` wrote once it served; the file may exist before its text does."""
    path = run_dir / "metrics.port"
    text = path.read_text().strip() if path.exists() else ""
    assert text.isdigit(), f"metrics.port: {text!r}"
    return int(text)


def scraped(port: int) -> dict[tuple[str, str], float]:
    """What the exporter shows; a busy exporter may reset a connection: that is "not yet", and
    ``eventually`` notices a run that ended."""
    try:
        return scrape(port)
    except OSError as exc:
        raise AssertionError(f"the exporter did not answer: {exc}") from exc


def scrape(port: int) -> dict[tuple[str, str], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, sample.labels.get("vertex", ""))] = sample.value
    return out


def test_run_serves_metrics_writes_a_report_and_events_and_status_read_it(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_text(PIPELINE.format(rate=400, total=4000))
    run_dir = tmp_path / "run"
    # It runs until every message arrived and was scraped, then stops on SIGTERM as on Ctrl-C
    # (--duration's own stop is the demo's and the dry run's).
    proc = tidal("run", str(spec), "--run-dir", str(run_dir), "--metrics-port", "0")

    def exported() -> None:
        """Every metric the test reads, from one scrape. The rates come with the controller's first
        look, which may follow the first delivery, and the decisions a moment after the rates
        (counted from the event log that look writes last): each is waited for."""
        metrics = scraped(port)
        assert metrics.get(("tidal_vertex_processed_total", "out"), 0) > 0
        replicas = metrics.get(("tidal_vertex_replicas", "work"))
        assert replicas is not None and replicas >= 0, replicas
        assert ("tidal_buffer_pending", "work") in metrics and ("tidal_buffer_usage_ratio", "work") in metrics
        assert ("tidal_vertex_processing_rate", "gen") in metrics
        assert any(name == "tidal_scaling_decisions_total" for name, _ in metrics), sorted(metrics)

    try:
        port = eventually(lambda: metrics_port(run_dir), 120, "the metrics endpoint", proc=proc)
        eventually(exported, 180, "the pipeline's metrics", proc=proc)
        code, text = output("status", str(run_dir))
        assert code == 0 and "running" in text and "work" in text, text
        # A second driver on the live run's directory is refused, naming the first (#57).
        code, text = output("run", str(spec), "--run-dir", str(run_dir), "--no-metrics", "--no-live")
        assert code != 0 and f"another tidal run (pid {proc.pid}) is running on it" in " ".join(
            text.split()
        ), text
        wait_for(lambda: len(lines(run_dir / "out.jsonl")) >= 4000, 180, "every message", proc)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert "report:" in out
    assert sorted(lines(run_dir / "out.jsonl")) == sorted(f"work:gen:{n}" for n in range(1, 4001))
    report = run_dir / "report"
    for vertex in ("gen", "work", "out"):
        assert (report / f"{vertex}.png").stat().st_size > 10_000
    summary = {s["vertex"]: s for s in json.loads((report / "summary.json").read_text())}
    assert summary["out"]["processed"] == 4000 and summary["work"]["replica_seconds"] > 0
    series = [json.loads(line) for line in (run_dir / "series.jsonl").read_text().splitlines()]
    assert {r["name"] for r in series} == {"gen", "work", "out"} and len(series) > 30
    code, text = output("events", str(run_dir), "--vertex", "work")
    assert code == 0 and "work" in text and "decisions shown" in text, text
    code, text = output("status", str(run_dir))
    assert code == 0 and "not running" in text


def test_dry_run_shows_decisions_and_changes_no_replicas(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_text(PIPELINE.format(rate=0, total=0))  # nothing flows: the policy wants zero
    run_dir = tmp_path / "run"
    proc = tidal("run", str(spec), "--run-dir", str(run_dir), "--dry-run", "--no-metrics")

    def recommended() -> list[dict]:
        path = run_dir / "events.jsonl"
        text = path.read_text() if path.exists() else ""
        events = [json.loads(line) for line in text.splitlines() if line.endswith("}")]
        return [e for e in events if e["vertex"] == "work" and e["desired"] != e["current"]]

    try:  # until the first recommendation, however long a busy machine takes to get there
        wait_for(lambda: bool(recommended()), 180, "a recommendation for work", proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    wanted = recommended()
    assert wanted and wanted[0]["rule"] == "scale-to-zero"  # recommended…
    control = ControlStore(run_dir / "pipeline.db")
    assert control.replicas("work") == 1 and control.replicas("gen") == 1  # …never applied
    assert "dry run" in out


def test_an_invalid_pipeline_is_refused_with_the_path_and_the_fix(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_text(PIPELINE.format(rate=1, total=1).replace("lookbackSeconds", "lookbackSecond"))
    code, text = output("run", str(spec), "--run-dir", str(tmp_path / "run"))
    assert code == 2
    assert "vertices[1].scale.lookbackSecond" in text and "lookbackSeconds" in text, text


def test_demo_runs_the_wave_pipeline_and_checks_exactly_once(tmp_path):
    # The demo until its first orders are archived (Spark started, the first wave flowed), then
    # Ctrl-C: it drains, writes the report and checks what arrived. No fixed window: a busy
    # machine only makes it wait longer for the first orders.
    demo = subprocess.Popen(
        [sys.executable, "-m", "tidal", "demo"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_for(lambda: any(lines(d / "orders.jsonl") for d in runs(tmp_path)), 300, "archived orders", demo)
    finally:
        demo.send_signal(signal.SIGINT)
        text, _ = demo.communicate(timeout=180)
    assert demo.returncode == 0, text
    assert "each exactly once" in text and "report:" in text
    (run_dir,) = runs(tmp_path)
    assert (run_dir / "report" / "enrich.png").exists()
    assert lines(run_dir / "orders.jsonl")


def runs(root: Path) -> list[Path]:
    return list((root / "runs").iterdir()) if (root / "runs").exists() else []
