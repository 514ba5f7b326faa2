"""Numaflow's sink failure routing (retryStrategy, fallback, onSuccess) on real sinks: only the
refused messages are retried on Numaflow's backoff, onFailure decides after the steps, a
pynumaflow sink's per-message answers are routed, and a replayed batch keeps its first routing,
so each message is in exactly one of primary and fallback."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pynumaflow.sinker import Message, Response, Responses

from tidal.errors import SinkError
from tidal.spark.sinks.connector import build_sink
from tidal.spark.sinks.files import read_file_sink
from tidal.spark.sinks.routes import RoutedPart, RoutedSink
from tidal.spec import parse_pipeline
from tidal.spec.model import SinkSpec
from tidal.spec.retry import BackoffSpec, backoff_delay

IDS = [f"m{n}" for n in range(10)]
PAYLOADS = [f"p{n}".encode() for n in range(10)]


class Flaky:
    """A user sink class whose first ``refusals`` writes raise (a sink that is down a while)."""

    calls: ClassVar[list[list[str]]] = []
    refusals = 0

    def write(self, messages: list[tuple[str, bytes]]) -> None:
        Flaky.calls.append([m for m, _ in messages])
        if len(Flaky.calls) <= Flaky.refusals:
            raise ConnectionError("sink down")


def _spec(tmp_path: Path, **routing: Any) -> SinkSpec:
    return SinkSpec.model_validate(
        {"user": {"class": f"{__name__}:Flaky"}, "fallback": {"file": {"path": "fallback.jsonl"}}, **routing}
    )


def _routed(tmp_path: Path, spec: SinkSpec) -> tuple[RoutedSink, list[float]]:
    sink = build_sink(spec, "out", tmp_path, "vertices[out].sink")
    assert isinstance(sink, RoutedSink)
    slept: list[float] = []
    sink._sleep = slept.append
    return sink, slept


@pytest.fixture(autouse=True)
def _fresh() -> None:
    Flaky.calls, Flaky.refusals = [], 0


def test_the_backoff_is_numaflows_interval_times_factor_capped():
    backoff = BackoffSpec(interval_seconds=1, steps=5, factor=2, cap_seconds=3)
    assert [backoff_delay(backoff, n) for n in range(1, 6)] == [1, 2, 3, 3, 3]
    assert backoff_delay(BackoffSpec(), 7) == pytest.approx(0.001)  # the defaults: 1 ms, factor 1


@given(st.floats(0, 0.99), st.floats(0, 1, exclude_max=True), st.integers(1, 20))
def test_jitter_stays_within_its_share_and_under_the_cap(jitter: float, draw: float, retry: int):
    backoff = BackoffSpec(interval_seconds=0.5, factor=1.5, cap_seconds=10, jitter=jitter, steps=20)
    plain = min(0.5 * 1.5 ** (retry - 1), 10)
    delay = backoff_delay(backoff, retry, draw)
    assert delay <= 10
    assert plain * (1 - jitter) - 1e-9 <= delay <= min(10, 0.5 * 1.5 ** (retry - 1) * (1 + jitter)) + 1e-9


def test_a_sink_down_for_two_writes_gets_everything_on_the_third_after_the_backoff(tmp_path):
    Flaky.refusals = 2
    spec = _spec(tmp_path, retryStrategy={"backoff": {"intervalSeconds": 1, "steps": 3, "factor": 2}})
    sink, slept = _routed(tmp_path, spec)
    part = sink.write(IDS, PAYLOADS)
    assert slept == [1, 2]
    assert Flaky.calls == [IDS, IDS, IDS]
    assert (part.retried, part.dropped, part.fell_back, part.fallback) == (20, 0, 0, [])


@pytest.mark.parametrize("on_failure", ["fallback", "drop", "retry"])
def test_after_the_steps_on_failure_decides(tmp_path, on_failure):
    Flaky.refusals = 99
    spec = _spec(tmp_path, retryStrategy={"backoff": {"steps": 2}, "onFailure": on_failure})
    sink, slept = _routed(tmp_path, spec)
    if on_failure == "retry":
        with pytest.raises(SinkError, match=r"10 message\(s\) still refused after 2 retries.*sink down"):
            sink.write(IDS, PAYLOADS)
        return
    part = sink.write(IDS, PAYLOADS)
    assert len(Flaky.calls) == 3 and len(slept) == 2  # the first write and two retries, as Numaflow
    sink.commit(0, [part])
    in_fallback = [r["id"] for r in read_file_sink(tmp_path / "fallback.jsonl")]
    if on_failure == "fallback":
        assert (part.fell_back, part.dropped, in_fallback) == (10, 0, IDS)
    else:
        assert (part.fell_back, part.dropped, in_fallback) == (0, 10, [])


class Answering:
    """A pynumaflow sink: odd messages to the fallback, every third "on success" (with a new
    value for the sixth), the rest accepted; ``m4`` fails once, then is accepted."""

    seen: ClassVar[list[str]] = []

    def __call__(self, datums: Any) -> Responses:
        out = Responses()
        for d in datums:
            n = int(d.id[1:])
            Answering.seen.append(d.id)
            if n % 2:
                out.append(Response.as_fallback(d.id))
            elif n % 3 == 0:
                out.append(Response.as_on_success(d.id, Message(b"six") if n == 6 else None))
            elif n == 4 and Answering.seen.count("m4") == 1:
                out.append(Response.as_failure(d.id, "busy"))
            else:
                out.append(Response.as_success(d.id))
        return out


def test_a_pynumaflow_sinks_answers_route_each_message(tmp_path):
    Answering.seen = []
    spec = SinkSpec.model_validate(
        {
            "pynumaflow": f"{__name__}:Answering",
            "retryStrategy": {"backoff": {"steps": 1}},
            "fallback": {"file": {"path": "fallback.jsonl"}},
            "onSuccess": {"file": {"path": "success.jsonl"}},
        }
    )
    sink, _ = _routed(tmp_path, spec)
    part = sink.write(IDS, PAYLOADS)
    sink.commit(0, [part])
    assert Answering.seen.count("m4") == 2 and Answering.seen.count("m2") == 1  # only the refused again
    fallback = read_file_sink(tmp_path / "fallback.jsonl")
    success = read_file_sink(tmp_path / "success.jsonl")
    assert [r["id"] for r in fallback] == ["m1", "m3", "m5", "m7", "m9"]
    assert {r["id"]: r["payload"] for r in success} == {"m0": "p0", "m6": "six"}


class Recording:
    """A file sink's commit that can be made to crash (a power cut mid-commit)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.crash = inner, False

    def write(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.write(*args, **kwargs)

    def commit(self, batch_id: int, parts: Any) -> None:
        if self.crash:
            raise KeyboardInterrupt("the driver died here")
        self.inner.commit(batch_id, parts)


def test_a_replay_that_routes_differently_commits_the_first_routing_so_each_message_is_in_one_sink(tmp_path):
    spec = SinkSpec.model_validate(
        {
            "file": {"path": "primary.jsonl"},
            "retryStrategy": {"backoff": {"steps": 1}, "onFailure": "fallback"},
            "fallback": {"file": {"path": "fallback.jsonl"}},
        }
    )
    first, _ = _routed(tmp_path, spec)
    first.fallback = Recording(first.fallback)
    # The first attempt: half the messages refused twice, so they went to the fallback.
    accepted = first.primary.write(IDS[:5], PAYLOADS[:5])
    refused = first.fallback.write(IDS[5:], PAYLOADS[5:])
    attempt = RoutedPart(primary=[accepted], fallback=[refused], fell_back=5)
    first.fallback.crash = True
    with pytest.raises(KeyboardInterrupt):
        first.commit(7, [attempt])  # the primary committed, then the driver died
    # The replay: the primary takes everything this time.
    again, _ = _routed(tmp_path, spec)
    replay = again.write(IDS, PAYLOADS)
    assert replay.fell_back == 0
    again.commit(7, [replay])
    primary = [r["id"] for r in read_file_sink(tmp_path / "primary.jsonl")]
    fallback = [r["id"] for r in read_file_sink(tmp_path / "fallback.jsonl")]
    assert primary == IDS[:5] and fallback == IDS[5:]  # the first routing, each message once


@pytest.mark.parametrize(
    ("routing", "message"),
    [
        ({"retryStrategy": {"onFailure": "fallback"}, "fallback": None}, "no fallback sink is given"),
        ({"retryStrategy": {"backoff": {"steps": 0}}}, "steps in backoff strategy cannot be 0"),
        ({"retryStrategy": {"backoff": {"factor": 0.5}}}, "factor in backoff strategy cannot be less than 1"),
        (
            {"retryStrategy": {"backoff": {"intervalSeconds": 2, "capSeconds": 1}}},
            "cap in backoff strategy cannot be less than interval",
        ),
        ({"retryStrategy": {"backoff": {"jitter": 1}}}, "jitter in backoff strategy should be between 0"),
        ({"retryStrategy": {"onFailure": "later"}}, "retryStrategy.onFailure"),
        ({"fallback": {"log": {}, "fallback": {"log": {}}}}, "cannot have its own retryStrategy"),
    ],
)
def test_bad_routing_is_refused_at_start_naming_the_field(routing, message):
    sink = {"log": {}, "fallback": {"blackhole": {}}, **routing}
    sink = {k: v for k, v in sink.items() if v is not None}
    with pytest.raises(Exception, match=message) as refused:
        parse_pipeline(
            {
                "name": "p",
                "vertices": [
                    {"name": "in", "source": {"generator": {"rate": 1}}},
                    {"name": "out", "sink": sink},
                ],
                "edges": [{"from": "in", "to": "out"}],
            }
        )
    assert "vertices[1].sink" in str(refused.value) or "vertices.1.sink" in str(refused.value)


def test_numaflows_e2e_retry_strategy_retries_twice_then_drops(tmp_path):
    """Numaflow's TestExponentialBackoffRetryStrategyForPipeline: interval 1s, steps 2, factor 2,
    cap 3s, onFailure drop, on a sink that refuses everything: retries 1 and 2 (waits 1 s and
    2 s), never a third, then the messages are dropped and counted."""
    from tidal.examples.numaflow import failing_sink

    assert failing_sink  # the handler the manifest's sink-failure image runs as
    spec = SinkSpec.model_validate(
        {
            "pynumaflow": "tidal.examples.numaflow:failing_sink",
            "retryStrategy": {
                "backoff": {"intervalSeconds": 1, "steps": 2, "factor": 2, "capSeconds": 3, "jitter": 0},
                "onFailure": "drop",
            },
        }
    )
    sink, slept = _routed(tmp_path, spec)
    part = sink.write(IDS, PAYLOADS)
    assert slept == [1, 2]
    assert (part.dropped, part.retried, part.primary) == (10, 20, [])


def test_a_monovertexs_bypass_sends_tagged_messages_straight_to_each_part(tmp_path):
    spec = SinkSpec.model_validate(
        {
            "file": {"path": "primary.jsonl"},
            "fallback": {"file": {"path": "fallback.jsonl"}},
            "onSuccess": {"file": {"path": "success.jsonl"}},
            "bypass": {
                "sink": {"tags": {"values": ["sink"]}},
                "fallback": {"tags": {"values": ["fallback"]}},
                "onSuccess": {"tags": {"values": ["onSuccess"]}},
            },
        }
    )
    sink, _ = _routed(tmp_path, spec)
    tags = [(("sink", "fallback", "onSuccess", "other")[n % 4],) for n in range(10)]
    sink.commit(0, [sink.write(IDS, PAYLOADS, tags=tags)])
    got = {
        name: [r["id"] for r in read_file_sink(tmp_path / f"{name}.jsonl")]
        for name in ("primary", "fallback", "success")
    }
    assert got == {
        "primary": ["m0", "m3", "m4", "m7", "m8"],  # tagged sink, or nothing the bypass names
        "fallback": ["m1", "m5", "m9"],
        "success": ["m2", "m6"],
    }


def test_a_bypass_to_a_part_the_sink_lacks_is_refused():
    with pytest.raises(Exception, match=r"bypass\.fallback routes to a fallback sink, and none is given"):
        SinkSpec.model_validate({"log": {}, "bypass": {"fallback": {"tags": {"values": ["x"]}}}})
