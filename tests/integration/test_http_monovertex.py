"""Numaflow's HTTP MonoVertex e2e tests (numaproj/numaflow test/monovertex-e2e: ``TestMapBypass``,
the streaming MonoVertex) on Tidal: the manifests converted as they stand, Numaflow's clients'
requests (a raw body to ``/vertices/<name>``, ``x-numaflow-id``, ``x-numaflow-event-time``), and
file sinks in place of their Redis sinks so the test counts what arrives, once each."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import manifest, parse_pipeline
from tidal.testing import delivered, ids_of

from .waits import eventually

pytestmark = pytest.mark.spark

E2E = Path(__file__).parents[1] / "data" / "numaflow" / "e2e"
REDIS = {"numaflow-rs/redis-sink": "tidal.examples.numaflow:log_sink"}  # swapped for files below


def converted(name: str) -> dict[str, Any]:
    data = manifest.convert(yaml.safe_load((E2E / f"{name}.yaml").read_text()), REDIS).data
    return {**data, "controller": {"intervalSeconds": 0.5}}


def post(url: str, body: bytes, **headers: str) -> int:
    """As Numaflow's e2e client sends: the body as it is, no Content-Type of JSON."""
    sent = {"Content-Type": "text/plain", **{k.replace("_", "-"): v for k, v in headers.items()}}
    request = urllib.request.Request(url, data=body, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_numaflows_map_bypass_routes_raw_posts_by_their_tags_each_once(spark, tmp_path):
    data = converted("map-bypass")
    sink = data["sink"]
    sink.update(file={"path": "sink.jsonl"}, fallback={"file": {"path": "fallback.jsonl"}})
    sink.update(onSuccess={"file": {"path": "success.jsonl"}})
    del sink["pynumaflow"]
    spec = parse_pipeline(data)
    assert [v.name for v in spec.vertices] == ["map-bypass-http", "map-bypass", "map-bypass-sink"]
    words = {"success": "on-success-message", "fallback": "fallback-message", "sink": "primary-message"}
    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
        url = run.requests["map-bypass-http"].url.rstrip("/") + "/vertices/map-bypass"
        for part, word in words.items():
            for k in range(20):
                assert post(url, f"{word} {k}".encode(), x_numaflow_id=f"{part}-{k}") == 200
        assert post(url, b"primary-message 0", x_numaflow_id="sink-0") == 200  # a retry: stored once
        assert post(url.replace("/map-bypass", "/another"), b"primary-message", x_numaflow_id="x") == 404

        def routed() -> dict[str, list[str]]:
            run.check()
            got = {p: ids_of(delivered(tmp_path / f"{p}.jsonl")) for p in words}
            assert all(len(ids) >= 20 for ids in got.values()), {p: len(i) for p, i in got.items()}
            return got

        got = eventually(routed, 300, "every message in its part")
    got = {p: ids_of(delivered(tmp_path / f"{p}.jsonl")) for p in words}
    for part in words:
        assert sorted(i.rsplit(":", 1)[-1] for i in got[part]) == sorted(f"{part}-{k}" for k in range(20)), (
            part
        )
    texts = {line["payload"] for line in delivered(tmp_path / "sink.jsonl")}
    assert "primary-message 3" in texts  # the body, as it came


def test_numaflows_streaming_monovertex_takes_raw_posts_into_its_sink_once(spark, tmp_path):
    data = converted("streaming-mono-vertex")
    data["sink"] = {"file": {"path": "out.jsonl"}}
    spec = parse_pipeline(data)
    with PipelineRun(spec, tmp_path, spark=spark, trigger_seconds=0.25) as run:
        url = run.requests["streaming-mono-vertex-http"].url
        stamp = "1663006726000"
        for k in range(50):
            assert post(url, f"hello {k}".encode(), x_numaflow_id=f"m{k}", x_numaflow_event_time=stamp) == 200

        def arrived() -> list[str]:
            run.check()
            ids = ids_of(delivered(tmp_path / "out.jsonl"))
            assert len(ids) >= 50, len(ids)
            return ids

        eventually(arrived, 300, "50 messages in the sink")
    ids = ids_of(delivered(tmp_path / "out.jsonl"))
    assert sorted(i.rsplit(":", 1)[-1] for i in ids) == sorted(f"m{k}" for k in range(50))
