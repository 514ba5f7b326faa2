"""The web dashboard in a real browser: Debian's headless Chromium driven by Selenium.

A short real pipeline runs with ``tidal run --ui``; the page must show its vertices, follow the
replicas the controller sets, explain a decision on click, and load the finished run from disk,
side by side with a run directory that is damaged. Each view is saved as a screenshot under
``runs/screenshots/`` (a test artifact to look at). The page's first load and how long after
the controller's decision the page showed it are measured and printed, not asserted.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tidal.ui.server import Dashboard

from .test_cli import tidal
from .waits import eventually, wait_for

pytestmark = pytest.mark.spark

SHOTS = Path("runs") / "screenshots"
CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")

PIPELINE = """
name: waves
limits: {readBatchSize: 200}
controller: {intervalSeconds: 0.5}
vertices:
  - name: orders
    source:
      generator: {rate: 2500, maxMessages: 24000, msgSize: 40}
  - name: enrich
    udf: {map: "tidal.examples.udfs:slow_upper"}
    scale: {lookbackSeconds: 3, scaleUpCooldownSeconds: 1, scaleDownCooldownSeconds: 2, max: 4,
            targetProcessingSeconds: 2}
  - name: archive
    sink: {file: {path: archive.jsonl}}
edges:
  - {from: orders, to: enrich, chain: false}   # enrich scales on its own buffer
  - {from: enrich, to: archive}                # archive runs in enrich's query
"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM.exists() and DRIVER.exists()):
        pytest.fail(
            "Chromium is missing: make test installs it (sudo apt-get install -y chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1400,1300", f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def shot(driver, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def js(driver, script: str):
    return driver.execute_script(script)


def replicas_on_page(driver) -> str:
    return js(
        driver,
        "const n = document.querySelector('[data-vertex=enrich]'); return n ? n.dataset.replicas : null",
    )


@pytest.mark.long
def test_a_live_run_then_the_finished_run_from_disk(browser, tmp_path):
    spec = tmp_path / "waves.yaml"
    spec.write_text(PIPELINE)
    run_dir = tmp_path / "run"
    proc = tidal("run", str(spec), "--run-dir", str(run_dir), "--no-metrics", "--ui", "--ui-port", "0")
    url_line: list[str] = []

    def dashboard_url() -> bool:
        line = proc.stdout.readline()
        found = re.search(r"dashboard: (http://127\.0\.0\.1:\d+/)", line)
        if found:
            url_line.append(found.group(1))
        return bool(found)

    try:
        wait_for(dashboard_url, 180, "the dashboard's address", proc)
        started = time.monotonic()
        browser.get(url_line[0])
        wait_for(
            lambda: js(browser, "return document.querySelectorAll('[data-vertex]').length") == 3,
            60,
            "the graph",
        )
        first_load = time.monotonic() - started
        # The graph shows every vertex of the pipeline.
        names = js(
            browser, "return [...document.querySelectorAll('[data-vertex]')].map(n => n.dataset.vertex)"
        )
        assert sorted(names) == ["archive", "enrich", "orders"]
        # A buffered edge and a chained one, each drawn as what it is.
        chained = js(
            browser,
            "return Object.fromEntries([...document.querySelectorAll('[data-edge]')]"
            ".map(e => [e.dataset.edge, e.dataset.chained]))",
        )
        assert chained == {"orders->enrich": "0", "enrich->archive": "1"}, chained
        # Replicas change on the page when the controller changes them.
        seen: list[tuple[float, str]] = []

        def scaled_up() -> bool:
            value = replicas_on_page(browser)
            if not seen or seen[-1][1] != value:
                seen.append((time.time(), value))
            return value not in (None, "", "0", "1")

        wait_for(scaled_up, 120, "the page to show enrich scaled up", proc)
        # The selected vertex shows what a replica needs (VPA's recommender over its tasks).
        wait_for(
            lambda: "memory" in (js(browser, "return document.querySelector('.vertical').textContent") or ""),
            120,
            "the vertical recommendation",
            proc,
        )
        shot(browser, "dashboard-live")

        def the_decision() -> dict:
            """The decision behind the replicas shown: the controller logs it just after it sets the
            count the page reads, so the page may show the count first."""
            decisions = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
            ups = [d for d in decisions if d["vertex"] == "enrich" and d["desired"] == int(seen[-1][1])]
            assert ups, f"no decision for enrich to {seen[-1][1]} in the event log yet"
            return ups[0]

        up = eventually(the_decision, 30, "the decision in the event log", proc=proc)
        shown_after = seen[-1][0] - up["at"]
        print(
            f"dashboard: first load {first_load:.2f} s; replicas shown {shown_after:.2f} s after the decision"
        )

        # A pause from outside shows on the page as the phase, and a resume takes it back.
        def badge() -> str:
            return str(
                js(browser, "return (document.querySelector('.run .badge[data-phase]') || {}).textContent")
            )

        paused = subprocess.run(
            [sys.executable, "-m", "tidal", "pause", str(run_dir), "--no-drain"],
            check=False,
            capture_output=True,
            text=True,
        )
        assert paused.returncode == 0, paused.stdout + paused.stderr
        wait_for(lambda: badge() == "paused", 60, "the page to show the pipeline paused", proc)
        resumed = subprocess.run(
            [sys.executable, "-m", "tidal", "resume", str(run_dir)],
            check=False,
            capture_output=True,
            text=True,
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        wait_for(lambda: badge() == "running", 60, "the page to show it running again", proc)
        archive = run_dir / "archive.jsonl"
        wait_for(
            lambda: archive.exists() and len(archive.read_text().splitlines()) >= 24000, 180, "the end", proc
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)

    # The finished run, from disk, beside a damaged run directory.
    damaged = tmp_path / "damaged"
    shutil.copytree(run_dir, damaged, ignore=shutil.ignore_patterns("checkpoints", "pipeline.db*", "*.log"))
    (damaged / "pipeline.yaml").write_bytes(b"\x00\x01 not yaml")
    dashboard = Dashboard([run_dir, damaged, tmp_path / "gone"]).start(0)
    try:
        browser.get(dashboard.url)
        wait_for(
            lambda: js(browser, "return document.querySelectorAll('.run').length") == 3, 60, "three panels"
        )

        def every_panel_drawn() -> None:
            """Each panel is drawn from its own stream, whenever that stream's first message comes:
            the events of the first say nothing about the errors of the other two."""
            events = js(browser, "return document.querySelectorAll('#run-0 .event-row').length")
            assert events > 3, events
            assert js(browser, "return document.querySelector('#run-0 .badge').textContent") == "finished"
            errors = js(browser, "return [...document.querySelectorAll('.error')].map(e => e.textContent)")
            assert any("cannot be read" in e for e in errors), errors
            assert any("does not exist" in e for e in errors), errors
            assert not any("Traceback" in e for e in errors)

        eventually(every_panel_drawn, 60, "the three panels drawn")
        # A decision's reason is shown on click: a dot on the replicas chart.
        # The last scale-up (a resume is an up too, but says who asked, not what the policy saw).

        def scale_ups() -> list:
            found = browser.find_elements("css selector", "#run-0 .decision-marker.up[data-rule='scale-up']")
            assert found, "no scale-up on the replicas chart"
            return found

        marker = eventually(scale_ups, 60, "the scale-ups on the chart")[-1]
        rule = marker.get_attribute("data-rule")
        marker.click()

        def detail_shown() -> None:
            found = browser.find_elements("css selector", "#run-0 .detail")
            assert found, "no detail yet"
            detail = found[0].text
            # What the policy saw: `tidal`'s backlog (the default), Numaflow's average pending.
            saw = "backlog" in detail or "avg pending" in detail
            assert rule in detail and "→" in detail and saw, detail

        eventually(detail_shown, 60, "the decision's detail")
        # The event log filters by rule.
        from selenium.webdriver.support.select import Select

        Select(browser.find_element("css selector", "#run-0 select[aria-label=rule]")).select_by_value(rule)
        wait_for(
            lambda: (
                set(
                    js(
                        browser,
                        "return [...document.querySelectorAll('#run-0 .event-row')].map(r => r.dataset.rule)",
                    )
                )
                == {rule}
            ),
            60,
            "the filtered log",
        )
        shot(browser, "dashboard-finished")
    finally:
        dashboard.stop()


def _finished_run_with_faults(run_dir: Path) -> None:
    """A finished run's files as ``tidal run`` writes them, with three kinds of fault: a timed one
    the chaos bench injected (lifted after 20 s), a buffer server silent then back, and an
    executor lost (in ``executors.jsonl``), over 60 s of the map's series."""
    run_dir.mkdir()
    (run_dir / "pipeline.yaml").write_text(PIPELINE)
    t0 = 1_790_000_000.0
    rows = [
        {"name": name, "at": t0 + i, "replicas": 1 + (i > 20), "desired": 1 + (i > 20), "rate": 100.0,
         "pending": 50 * (i % 7), "processed": 100 * i}
        for i in range(60)
        for name in ("orders", "enrich", "archive")
    ]  # fmt: skip
    (run_dir / "series.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    decision = {"vertex": "enrich", "at": t0 + 20.5, "current": 1, "desired": 2, "rule": "scale-up",
                "reason": "avg pending 300 over 2 s of processing", "inputs": {}}  # fmt: skip
    (run_dir / "events.jsonl").write_text(json.dumps(decision) + "\n")
    vertices = [{"name": n, "replicas": 1, "desired": 1} for n in ("orders", "enrich", "archive")]
    status = {"at": t0 + 60, "started_at": t0, "state": "stopped", "pipeline": "waves", "vertices": vertices}
    (run_dir / "status.json").write_text(json.dumps(status))

    def fault(at: float, kind: str, who: str, reason: str, **extra: object) -> dict:
        return {"at": t0 + at, "kind": kind, "who": who, "reason": reason, **extra}

    faults = [
        fault(21.0, "injected: outage", "(bench)", "the driver host's link down 20 s", lifted=t0 + 41.0),
        fault(30.0, "buffer server silent", "(buffers)", "JetStream server n2 silent", server="n2"),
        fault(34.0, "buffer server back", "(buffers)", "JetStream server n2 answers again", server="n2"),
    ]
    (run_dir / "faults.jsonl").write_text("".join(json.dumps(f) + "\n" for f in faults) + '{"at": 9')
    lost = {
        "kind": "lost",
        "at": t0 + 50.0,
        "id": "3",
        "host": "w2",
        "reason": "Executor heartbeat timed out",
    }
    (run_dir / "executors.jsonl").write_text(json.dumps(lost) + "\n")


def test_a_runs_faults_are_bands_on_its_charts_and_rows_under_its_log(browser, tmp_path):
    run_dir = tmp_path / "run"
    _finished_run_with_faults(run_dir)
    dashboard = Dashboard([run_dir]).start(0)
    try:
        browser.get(dashboard.url)

        def bands_drawn() -> list:
            bands = js(
                browser,
                "return [...document.querySelectorAll('#run-0 .chart .fault-band')].map(b => ({"
                "kind: b.dataset.kind, span: b.classList.contains('span'),"
                " width: Number(b.querySelector('rect') ? b.querySelector('rect').getAttribute('width') : 0),"
                " title: b.querySelector('title').textContent}))",
            )
            # Three charts, three faults each: the buffer server's back is its band's end, not a fault.
            assert len(bands) == 9, bands
            kinds = {b["kind"] for b in bands}
            assert kinds == {"injected: outage", "buffer server silent", "executor lost"}, kinds
            for b in bands:
                # A fault with a known end is a band as wide as it lasted; the executor lost a line.
                assert b["span"] == (b["kind"] != "executor lost"), b
                assert b["span"] is False or b["width"] > 2, b
            outage = next(b for b in bands if b["kind"] == "injected: outage")
            assert "the driver host's link down 20 s" in outage["title"] and "for 20 s" in outage["title"], (
                outage
            )
            lost = next(b for b in bands if b["kind"] == "executor lost")
            assert "executor 3 on w2: Executor heartbeat timed out" in lost["title"], lost
            return bands

        bands = eventually(bands_drawn, 60, "the faults drawn on the charts")
        widths = {b["kind"]: b["width"] for b in bands if b["span"]}
        assert widths["injected: outage"] > widths["buffer server silent"], widths  # 20 s against 4 s

        def rows_listed() -> None:
            rows = js(
                browser,
                "return [...document.querySelectorAll('#run-0 .fault-row')].map(r => [r.dataset.kind,"
                " r.querySelector('.cause').textContent, r.title])",
            )
            # Every fault of both files, newest first, with its cause; the cut last line skipped.
            assert [r[0] for r in rows] == [
                "executor lost", "buffer server back", "buffer server silent", "injected: outage"
            ], rows  # fmt: skip
            assert rows[2][1] == "JetStream server n2 silent" and "for 4 s" in rows[2][2], rows
            assert rows[0][1] == "executor 3 on w2: Executor heartbeat timed out", rows

        eventually(rows_listed, 60, "the faults listed under the event log")
        shot(browser, "dashboard-faults")
    finally:
        dashboard.stop()
