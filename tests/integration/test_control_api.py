"""The control API on real Spark: the scale subresource, pause and resume, live edits, tokens.

A scale written from outside is what the vertex's next micro-batch runs with; a pause drains the
buffers, takes every vertex to 0 and loses nothing, and a resume delivers every message exactly
once; a run started again on a paused directory stays paused; writes need the run's token.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tidal.api.auth import ensure_token
from tidal.api.server import ControlServer
from tidal.isb.control import ControlStore
from tidal.spark.run.operations import RunOperations
from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import parse_pipeline
from tidal.testing import delivered, ids_of

from .test_cli import tidal
from .waits import eventually, wait_for

pytestmark = pytest.mark.spark


MERGE = "application/merge-patch+json"


def call(
    url: str, method: str = "GET", body: Any = None, token: str | None = None, content_type: str = MERGE,
    raw: bytes | None = None,
) -> tuple[int, dict]:  # fmt: skip
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", content_type)
    request.add_header("User-Agent", "kubectl/v1.31.0 (linux/amd64)")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def spec(rate: int, total: int, *, disabled: bool = True) -> Any:
    return parse_pipeline(
        {
            "name": "ops",
            "limits": {"readBatchSize": 200},
            "controller": {"intervalSeconds": 0.5},
            "vertices": [
                {"name": "gen", "source": {"generator": {"rate": rate, "maxMessages": total, "msgSize": 20}}},
                {"name": "work", "udf": {"map": "tidal.examples.udfs:upper"},
                 "scale": {"disabled": disabled, "min": 0, "max": 4}},
                {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
            ],
            # work keeps its own buffer and replicas; out runs in work's query
            "edges": [{"from": "gen", "to": "work", "chain": False}, {"from": "work", "to": "out"}],
        }
    )  # fmt: skip


def test_a_scale_written_from_outside_is_what_the_next_batches_run_and_bad_writes_change_nothing(
    spark, tmp_path
):
    run = PipelineRun(spec(2000, 10**9), tmp_path, spark=spark, trigger_seconds=0.25).start()
    token = ensure_token(tmp_path)
    server = ControlServer(RunOperations(run), token).start(0)
    scale_url = f"{server.url}/vertices/work/scale"
    try:
        assert run.control is not None
        control = run.control
        code, scale = call(scale_url)
        assert code == 200 and scale["spec"]["replicas"] == 1 and scale["kind"] == "Scale"
        assert scale["status"]["selector"] == "tidal.dev/pipeline=ops,tidal.dev/vertex=work"
        body = {"spec": {"replicas": 3}}
        refused = [
            (call(scale_url, "PATCH", body), 401),
            (call(scale_url, "PATCH", body, token="not-the-token"), 403),
            (call(scale_url + "?access_token=" + token, "PATCH", body, token=token), 400),
            (call(scale_url, "PATCH", token=token, raw=b"{not json"), 400),
            (call(scale_url, "PATCH", {"spec": {"replicas": -1}}, token=token), 422),
            (call(scale_url, "PATCH", {"spec": {"replicas": 2.5}}, token=token), 422),
            (call(scale_url, "PATCH", {"spec": {"replicas": 9}}, token=token), 422),
            (call(f"{server.url}/vertices/nope/scale", "PATCH", body, token=token), 404),
            (call(f"{server.url}/vertices/out/scale", "PATCH", body, token=token), 409),  # in work's query
            (call(scale_url, "PUT", {"metadata": {"resourceVersion": "999"}, "spec": {"replicas": 2}},
                  token=token, content_type="application/json"), 409),
        ]  # fmt: skip
        for (code, answer), expected in refused:
            assert code == expected and answer["kind"] == "Status", (code, expected, answer)
        assert "[min 0, max 4]" in refused[6][0][1]["message"]
        assert control.replicas("work") == 1  # nothing changed
        written_at = time.time()
        code, scale = call(scale_url, "PATCH", body, token=token)
        assert code == 200 and scale["spec"]["replicas"] == 3
        assert "stays until the next write" in scale["metadata"]["annotations"]["tidal.dev/after-write"]

        def ran_with_three() -> bool:
            run.check()
            return any(b.at > written_at and b.tasks == 3 for b in control.batches("work"))

        wait_for(ran_with_three, 120, "a batch of work with 3 tasks")
        # With scale.disabled the write stays: the controller keeps deciding and holds it.
        assert run.controller is not None
        controller = run.controller
        held_at = time.time()

        def ticked_since() -> bool:  # a decision made three ticks (0.5 s each) after the write
            decision = controller.decisions().get("work")
            return decision is not None and decision.at >= held_at + 1.5

        wait_for(ticked_since, 60, "three more ticks")
        assert control.replicas("work") == 3
        code, scale = call(scale_url)
        assert scale["status"]["replicas"] == 3  # the tasks that ran
        # Concurrent writes: the last one wins, and both are events.
        answers: list[tuple[int, dict]] = []

        def write(n: int) -> None:
            answers.append(call(scale_url, "PATCH", {"spec": {"replicas": n}}, token=token))

        writers = [threading.Thread(target=write, args=(n,)) for n in (2, 4)]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
        assert sorted(code for code, _ in answers) == [200, 200]
        assert control.replicas("work") in (2, 4)
    finally:
        server.stop()
        run.stop()
    external = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    external = [e for e in external if e["rule"] == "external"]
    assert [e["desired"] for e in external][:1] == [3] and sorted(e["desired"] for e in external[1:]) == [
        2,
        4,
    ]
    assert all("kubectl" in e["reason"] and e["inputs"]["by"] == "127.0.0.1" for e in external)


PIPELINE = """
name: pausing
limits: {{readBatchSize: 1000}}
controller: {{intervalSeconds: 0.5}}
vertices:
  - name: gen
    source: {{generator: {{rate: {rate}, maxMessages: {total}, msgSize: 20}}}}
  - name: work
    udf: {{map: "tidal.examples.udfs:upper"}}
    scale: {{min: 0, max: {max}, lookbackSeconds: 3, scaleUpCooldownSeconds: 1, scaleDownCooldownSeconds: 2}}
  - name: out
    sink: {{file: {{path: out.jsonl}}}}
edges:
  - {{from: gen, to: work, chain: false}}
  - {{from: work, to: out}}
"""


def cli(*args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "tidal", *args], check=False, capture_output=True, text=True, timeout=300
    )
    return done.returncode, " ".join((done.stdout + done.stderr).split())


@pytest.mark.long
def test_pause_drains_and_holds_a_restart_stays_paused_resume_delivers_everything_once(tmp_path):
    total = 30_000  # 7.5 s of the generator at 4,000/s: the pause comes long before its end
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE.format(rate=4000, total=total, max=4))
    run_dir = tmp_path / "run"
    args = ("run", str(path), "--run-dir", str(run_dir), "--no-metrics", "--no-live")
    out = run_dir / "out.jsonl"
    first = tidal(*args)
    try:
        wait_for(
            lambda: (run_dir / "api.json").exists() and len(delivered(out)) >= 1000,
            180,
            "the first ids",
            first,
        )
        code, text = cli("pause", str(run_dir))
        assert code == 0 and "pipeline paused" in text, text
        control = ControlStore(run_dir / "pipeline.db")
        assert control.phase() == "Paused"
        assert control.replicas("gen") == control.replicas("work") == 0
        held = len(delivered(out))
        assert held < total, "everything arrived before the pause; the test proves nothing"
        code, text = cli("scale", str(run_dir), "work", "--replicas", "2")
        assert code == 1 and "Paused" in text and "resume" in text, text  # refused while paused
        time.sleep(3)  # paused: nothing more arrives
        assert len(delivered(out)) == held

        def status_paused() -> None:  # status.json is written at the run's next poll, not at once
            assert json.loads((run_dir / "status.json").read_text())["phase"] == "Paused"

        eventually(status_paused, 60, "status.json to say Paused", proc=first)
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=120)
    second = tidal(*args)  # started again on a paused directory: it stays paused
    try:
        wait_for((run_dir / "api.json").exists, 180, "the control API again", second)
        time.sleep(3)
        assert len(delivered(out)) == held and ControlStore(run_dir / "pipeline.db").phase() == "Paused"
        code, text = cli("resume", str(run_dir))
        assert code == 0 and "resumed" in text, text
        code, text = cli("scale", str(run_dir), "work", "--replicas", "3")
        assert code == 0 and "work scaled to 3" in text, text
        code, text = cli("get", "scale", str(run_dir))
        assert code == 0 and "work" in text and "out" in text and "enabled" in text, text
        code, text = cli("scale", str(run_dir), "work", "--replicas", "9")
        assert code == 1 and "[min 0, max 4]" in text, text
        # A live edit: the scale block of work. Changing its function needs a restart.
        path.write_text(PIPELINE.format(rate=4000, total=total, max=6))
        code, text = cli("apply", str(path), "--run-dir", str(run_dir))
        assert code == 0 and "vertices[work].scale.max: 4 → 6" in text, text
        code, text = cli("get", "scale", str(run_dir), "work")
        assert '"tidal.dev/max": "6"' in text, text
        changed = tmp_path / "changed.yaml"
        changed.write_text(
            PIPELINE.format(rate=4000, total=total, max=6).replace("udfs:upper", "udfs:slow_upper")
        )
        code, text = cli("apply", str(changed), "--run-dir", str(run_dir))
        assert code == 1 and "vertices[1].udf.map" in text and "restart" in text, text
        wait_for(lambda: len(delivered(out)) >= total, 240, "every id after the resume", second)
        # What needs a restart, with --restart: another function and 1,000 more messages. The run
        # drains, starts again in the same session and run directory, and goes on from there.
        more = total + 1000
        changed.write_text(PIPELINE.format(rate=4000, total=more, max=6).replace("udfs:upper", "udfs:enrich"))
        code, text = cli("apply", str(changed), "--run-dir", str(run_dir), "--restart")
        assert code == 0 and "restarted with the edited spec" in text, text

        def every_id_once() -> None:
            records = delivered(out)
            ids = ids_of(records)
            assert len(ids) == len(set(ids)) == more, (len(ids), len(set(ids)))
            assert set(ids) == {f"work:gen:{n}" for n in range(1, more + 1)}
            by_id = {r["id"]: r["payload"] for r in records}  # the last one through the new code
            assert "region=" in by_id[f"work:gen:{more}"] and "region=" not in by_id["work:gen:1"]

        eventually(every_id_once, 240, "the messages after the restart", proc=second, poll=1)
        time.sleep(2)  # anything doubled would show up now
    finally:
        second.send_signal(signal.SIGTERM)
        second.communicate(timeout=120)
    every_id_once()  # and nothing doubled since
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    rules = {e["rule"] for e in events}
    assert {"external", "paused", "resumed", "retuned"} <= rules, rules
    paused = [e for e in events if e["rule"] == "paused"]
    assert {e["vertex"] for e in paused} == {"gen", "work"} and all(
        "tidal-cli" in e["reason"] for e in paused
    )


def test_a_non_loopback_control_api_without_a_token_is_refused_before_anything_starts(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE.format(rate=10, total=10, max=2))
    code, text = cli(
        "run", str(path), "--run-dir", str(tmp_path / "run"), "--api-host", "0.0.0.0", "--api-auth", "none"
    )
    assert code == 2 and "--api-auth none" in text and "0.0.0.0" in text, text
    assert not (tmp_path / "run").exists()
    code, text = cli("scale", str(tmp_path / "nowhere"), "work", "--replicas", "1")
    assert code == 1 and "api.json" in text, text
