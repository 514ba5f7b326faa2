"""``tidal simulate`` and ``tidal bench decisions`` end to end (no Spark: seconds)."""

from __future__ import annotations

import json

import pytest

from tidal.bench import decisions
from tidal.cli.main import main
from tidal.sim import POLICIES, TRACES


def test_simulate_writes_scores_plots_and_reasons(tmp_path, capsys) -> None:
    out = tmp_path / "sim"
    assert main(["simulate", "--trace", "idle", "--policy", "numaflow", "--out", str(out)]) == 0
    scores = json.loads((out / "scores.json").read_text())
    assert [s["policy"] for s in scores] == ["numaflow"]
    assert scores[0]["arrived"] == 144_000
    assert (out / "numaflow.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    changes = [json.loads(line) for line in (out / "changes.jsonl").read_text().splitlines()]
    assert changes and all(c["policy"] == "numaflow" and c["reason"] for c in changes)
    assert any(c["rule"] == "wake-on-pending" for c in changes)
    assert "numaflow" in capsys.readouterr().out


def test_simulate_a_pipeline_file_with_a_capacity(tmp_path, capsys) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        "name: p\nvertices:\n"
        "  - {name: src, source: {generator: {rate: 1}}}\n"
        "  - {name: slow, udf: {map: 'tidal.examples.udfs:upper'}}\n"
        "  - {name: dst, sink: {blackhole: {}}}\n"
        "edges:\n  - {from: src, to: slow}\n  - {from: slow, to: dst}\n"
    )
    out = tmp_path / "out"
    args = ["simulate", str(pipeline), "--trace", "step-x2", "--policy", "all", "--capacity", "slow=100"]
    assert main([*args, "--out", str(out)]) == 0
    scores = json.loads((out / "scores.json").read_text())
    assert [s["policy"] for s in scores] == list(POLICIES)
    static = next(s for s in scores if s["policy"] == "static-peak")
    # 2000/s at the peak; a replica sustains 500 / (0.25 s + 500 / capacity) in micro-batches of 500:
    # 95.2/s for "slow" (→ 21), 1333/s for the source and the sink (→ 2 each)
    assert static["replica_seconds"] == 1200 * (21 + 2 + 2)
    assert "slow 100/s working, 95/s sustained" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("capacity", "message"),
    [
        ("work", "expected VERTEX=MESSAGES_PER_SECOND"),
        ("work=-3", "expected VERTEX"),
        ("nope=5", "not in the pipeline"),
    ],
)
def test_simulate_rejects_a_bad_capacity(capacity: str, message: str, tmp_path, capsys) -> None:
    assert main(["simulate", "--capacity", capacity, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().out


def test_simulate_rejects_an_invalid_pipeline(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nvertices: []\n")
    assert main(["simulate", str(bad), "--out", str(tmp_path)]) == 2
    assert "invalid pipeline" in capsys.readouterr().out


def test_bench_decisions_covers_every_trace_and_policy(tmp_path) -> None:
    assert decisions.main(tmp_path) == 0
    payload = json.loads((tmp_path / "decisions.json").read_text())
    pairs = {(s["trace"], s["policy"]) for s in payload["scores"]}
    assert pairs == {(t, p) for t in TRACES for p in POLICIES}
    table = (tmp_path / "decisions.md").read_text()
    assert all(f"**{t}**" in table for t in TRACES)
    assert sorted(p.stem for p in (tmp_path / "decisions").glob("*.png")) == sorted(TRACES)
    tuned = {(t["trace"], t["policy"]) for t in payload["tuned"]}  # DS2 and Flink at their fewest breaches
    assert tuned == {(t, p) for t in ("diurnal", "bursty") for p in ("ds2", "flink")}
    assert "**DS2 and Flink tuned to their fewest breaches**" in table
