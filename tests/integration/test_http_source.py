"""The HTTP source on real processes over loopback: the activator, receivers behind Knative's
queue-proxy, the KPA scaling them, and a Spark sink downstream. Every 2xx'd message must reach
the sink exactly once; nothing a refused request carried may be stored."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import parse_pipeline

from .test_cli import lines
from .waits import eventually, wait_for

pytestmark = pytest.mark.spark


def spec(http: dict[str, Any], kpa: dict[str, Any] | None = None, replicas: int = 0) -> Any:
    return parse_pipeline(
        {
            "name": "hooks",
            "controller": {"intervalSeconds": 0.5},
            "vertices": [
                {
                    "name": "in",
                    "source": {"http": http},
                    "replicas": replicas,
                    "kpa": {"target": 2, "window": "6s", "scale-to-zero-grace-period": "3s", **(kpa or {})},
                },
                {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
            ],
            "edges": [{"from": "in", "to": "out"}],
        }
    )


def post(url: str, body: bytes, **headers: str) -> tuple[int, dict[str, Any]]:
    sent = {"Content-Type": "application/json", **{k.replace("_", "-"): v for k, v in headers.items()}}
    request = urllib.request.Request(url, data=body, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def delivered(run: PipelineRun, want: set[str], timeout: float = 180) -> list[str]:
    """The sink's ids once every one of ``want`` is among them; a query that failed ends the wait.
    What must not be there (a duplicate, a refused message) is asserted by the caller, at the end."""

    def arrived() -> list[str]:
        run.check()
        got = lines(run.run_dir / "out.jsonl")
        missing = want - set(got)
        assert not missing, f"{len(missing)} of {len(want)} not in the sink yet, e.g. {sorted(missing)[:3]}"
        return got

    return eventually(arrived, timeout, f"{len(want)} messages in the sink", poll=0.3)


def wait_ready(path: Any, receivers: int, timeout: float = 120) -> None:
    wait_for(lambda: path.ready() >= receivers, timeout, f"{receivers} ready receivers")


def jsonl(path: Path) -> list[dict[str, Any]]:
    """The records written so far: read while the run writes, the last line may be unfinished."""
    text = path.read_text().rpartition("\n")[0] if path.exists() else ""
    return [json.loads(line) for line in text.splitlines()]


def series(run_dir: Path) -> list[dict[str, Any]]:
    return jsonl(run_dir / "requests.jsonl")


def test_a_request_at_zero_is_held_the_receivers_wake_and_it_is_answered(spark, tmp_path):
    run = PipelineRun(spec({"containerConcurrency": 4}), tmp_path, spark=spark, trigger_seconds=0.25).start()
    try:
        path = run.requests["in"]
        time.sleep(2)
        assert path.ready() == 0
        started = time.monotonic()
        status, answer = post(path.url, b'[{"n":1},{"n":2}]', Idempotency_Key="first")
        waited = time.monotonic() - started
        assert status == 200, answer
        assert answer == {"accepted": 2, "duplicates": 0, "ids": ["first/0", "first/1"]}
        assert path.ready() >= 1

        def wait_recorded() -> None:
            """A report or two: the longest wait is recorded in the series (waited for, not slept on)."""
            assert any(s["longest_wait"] > 0 for s in series(tmp_path)), "no wait in the series yet"

        eventually(wait_recorded, 120, "the longest wait in the series")
        assert sorted(delivered(run, {"first/0", "first/1"})) == ["first/0", "first/1"]
        recorded = max(s["longest_wait"] for s in series(tmp_path))
        assert 0 < recorded <= waited + 0.1

        def woken_by_the_kpa() -> None:
            """The decision that woke the source (its event is written just after it is applied)."""
            woke = [e for e in jsonl(tmp_path / "events.jsonl") if e["vertex"] == "in" and e["desired"] >= 1]
            assert woke, "no event of the source woken yet"
            assert woke[0]["rule"].startswith("kpa-"), woke[0]

        eventually(woken_by_the_kpa, 60, "the event of the wake-up")

        # Then idle: the KPA takes it back to zero after the grace period.
        def at_zero() -> None:
            assert path.ready() == 0, f"{path.ready()} receivers ready"

        eventually(at_zero, 120, "the source back at zero")
    finally:
        run.stop()
    assert not path.running()


def test_container_concurrency_one_never_lets_two_requests_into_a_receiver(spark, tmp_path):
    run = PipelineRun(
        spec({"containerConcurrency": 1}, {"min-scale": 2}, replicas=2), tmp_path, spark=spark
    ).start()
    try:
        path = run.requests["in"]
        wait_ready(path, 2)
        bodies = [json.dumps([{"n": i, "k": j} for j in range(50)]).encode() for i in range(200)]
        with ThreadPoolExecutor(16) as pool:
            answers = list(
                pool.map(lambda ib: post(path.url, ib[1], Idempotency_Key=f"cc-{ib[0]}"), enumerate(bodies))
            )
        ok = {f"cc-{i}/{j}" for i, (status, _) in enumerate(answers) if status == 200 for j in range(50)}
        assert len(ok) == 200 * 50, [a for a in answers if a[0] != 200][:3]
        wait_for(lambda: path.peak_inside() >= 1, 120, "a scrape of the receivers' peaks")
        assert path.peak_inside() == 1
        delivered(run, ok)
    finally:
        run.stop()
    assert sorted(lines(tmp_path / "out.jsonl")) == sorted(ok)  # exactly once, also once stopped


def test_overload_gets_503s_and_every_accepted_message_arrives_once_retries_included(spark, tmp_path):
    run = PipelineRun(
        spec({"containerConcurrency": 1, "maxHeld": 4, "holdTimeoutSeconds": 2}, {"max-scale": 1}, 1),
        tmp_path,
        spark=spark,
    ).start()
    try:
        path = run.requests["in"]
        wait_ready(path, 1)
        bodies = [json.dumps([{"n": i, "pad": "x" * 2000} for _ in range(100)]).encode() for i in range(300)]
        with ThreadPoolExecutor(48) as pool:
            answers = list(
                pool.map(lambda ib: post(path.url, ib[1], Idempotency_Key=f"o-{ib[0]}"), enumerate(bodies))
            )
        statuses = [s for s, _ in answers]
        assert 503 in statuses and 200 in statuses, sorted(set(statuses))
        assert set(statuses) <= {200, 503}
        refused = [a for s, a in answers if s == 503]
        assert all("error" in a for a in refused)
        # A client retry with the same key after a 2xx stores nothing new.
        first_ok = statuses.index(200)
        again = post(path.url, bodies[first_ok], Idempotency_Key=f"o-{first_ok}")
        assert again[0] == 200 and again[1]["accepted"] == 0 and again[1]["duplicates"] == 100
        ok = {f"o-{i}/{j}" for i, s in enumerate(statuses) if s == 200 for j in range(100)}
        rss_kb = int(
            next(
                line.split()[1]
                for line in Path(f"/proc/{path.activator_pids()[0]}/status").read_text().splitlines()
                if line.startswith("VmRSS")
            )
        )
        assert rss_kb < 300_000  # bounded: at most maxHeld bodies wait in the activator
        delivered(run, ok, timeout=300)
    finally:
        run.stop()
    assert sorted(lines(tmp_path / "out.jsonl")) == sorted(ok)  # exactly once, also once stopped


def test_a_receiver_killed_mid_request_loses_no_acknowledged_message(spark, tmp_path):
    run = PipelineRun(
        spec({"containerConcurrency": 2}, {"min-scale": 2}, replicas=2), tmp_path, spark=spark
    ).start()
    try:
        path = run.requests["in"]
        wait_ready(path, 2)
        victim = path.receiver_pids()[0]
        bodies = [json.dumps([{"n": i} for _ in range(20)]).encode() for i in range(400)]

        def send(ib: tuple[int, bytes]) -> int:
            if ib[0] == 100:
                os.kill(victim, signal.SIGKILL)
            try:
                return post(path.url, ib[1], Idempotency_Key=f"k-{ib[0]}")[0]
            except (OSError, ValueError):
                return -1  # the connection broke: an error, not a 2xx

        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(send, enumerate(bodies)))
        assert statuses.count(200) > 0
        assert set(statuses) <= {200, 502, 503, -1}, sorted(set(statuses))
        ok = {f"k-{i}/{j}" for i, s in enumerate(statuses) if s == 200 for j in range(20)}

        def replaced() -> None:
            """(The KPA may also have added receivers for the load: min-scale is 2.)"""
            pids, ready = path.receiver_pids(), path.ready()
            assert victim not in pids and ready >= 2, (victim, pids, ready)

        eventually(replaced, 120, "the killed receiver replaced")
        delivered(run, ok)
    finally:
        run.stop()
    got = lines(tmp_path / "out.jsonl")  # once stopped: nothing doubled since
    assert ok <= set(got) and len(got) == len(set(got))


def test_a_public_address_not_of_this_host_or_taken_stops_the_run_at_start_naming_it(spark, tmp_path):
    import socket

    from tidal import errors

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for http, where in (({"host": "192.0.2.7", "port": 8080, "auth": "none"}, "192.0.2.7:8080"),
                            ({"port": port}, f"127.0.0.1:{port}")):  # fmt: skip
            run = PipelineRun(spec(http), tmp_path / where.replace(":", "-"), spark=spark)
            with pytest.raises(errors.SpecError) as refused:
                run.start()
            run.stop()
            text = str(refused.value)
            assert "vertices[in].source.http" in text and f"cannot listen on {where}" in text, text
            assert "address of this host" in text, text


def test_bad_requests_get_a_4xx_that_names_the_problem_and_store_nothing(spark, tmp_path):
    run = PipelineRun(
        spec({"maxRequestBytes": 2048}, {"min-scale": 1}, replicas=1), tmp_path, spark=spark
    ).start()
    try:
        path = run.requests["in"]
        wait_ready(path, 1)
        cases = [
            (b'{"n": 1', {}, 400, "not valid JSON"),
            (b'{"n": 1}\nnot json\n', {"Content_Type": "application/x-ndjson"}, 400, "line 2"),
            (b"[]", {}, 400, "no message"),
            (b"n=1", {"Content_Type": "application/x-www-form-urlencoded"}, 415, "application/json"),
            (b"[" + b'{"n":1},' * 400 + b'{"n":1}]', {}, 413, "maxRequestBytes"),
            (b'[{"n":1},{"n":2}]', {"X_Message_Id": "one"}, 400, "Idempotency-Key"),
            (b'{"n":1}', {"Idempotency_Key": "has space"}, 400, "visible ASCII"),
        ]
        for body, headers, want, words in cases:
            status, answer = post(path.url, body, **headers)
            assert status == want and words in answer.get("error", ""), (body[:30], status, answer)
        assert run.buffers is not None
        assert run.buffers.open("out").stats().last_seq == 0  # nothing stored
        status, _ = post(path.url, b'{"n": 1}\n{"n": 2}\n', Content_Type="application/x-ndjson")
        assert status == 200
    finally:
        run.stop()


def listeners(port: int) -> set[int]:
    """The PIDs holding a listening TCP socket on ``port`` (from /proc: no ss or psutil needed)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:  # 0A: LISTEN
            inodes.add(fields[9])
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
        except OSError:
            continue
        if any(f"socket:[{inode}]" in links for inode in inodes):
            pids.add(int(proc.name))
    return pids


def test_with_burst_capacity_zero_the_activator_leaves_the_path_and_comes_back_at_zero(spark, tmp_path):
    run = PipelineRun(
        spec({"containerConcurrency": 0}, {"target-burst-capacity": 0}, replicas=1), tmp_path, spark=spark
    ).start()
    try:
        path = run.requests["in"]
        activator = path.activator_pids()[0]
        assert listeners(path.port) == {activator}  # at the start: only the activator

        def out_of_the_path() -> None:
            """The receiver holds the public port, the activator does not."""
            held = listeners(path.port)
            assert path.ready() >= 1 and held == set(path.receiver_pids()), (path.ready(), held)
            assert activator not in held

        eventually(out_of_the_path, 120, "the activator out of the path")
        answers = [post(path.url, json.dumps({"n": i}).encode(), X_Message_Id=f"m{i}") for i in range(50)]
        assert all(status == 200 for status, _ in answers)

        def served_out_of_the_path() -> None:
            assert any(not s["in_path"] and s["rps"] > 0 for s in series(tmp_path)), "no such sample yet"

        eventually(served_out_of_the_path, 120, "a sample of requests served out of the path")
        assert sorted(delivered(run, {f"m{i}" for i in range(50)})) == sorted(f"m{i}" for i in range(50))

        # Idle: the KPA takes the source to zero, and the activator holds the port again first.
        def at_zero() -> None:
            assert path.ready() == 0, f"{path.ready()} receivers ready"

        eventually(at_zero, 120, "the source back at zero")

        def activator_back() -> None:
            assert listeners(path.port) == {activator}, listeners(path.port)

        eventually(activator_back, 120, "the activator holding the port again")
        assert post(path.url, b'{"again": 1}', X_Message_Id="again")[0] == 200  # held, then served
    finally:
        run.stop()


def test_two_activators_each_balance_over_their_own_slice_and_every_message_arrives_once(spark, tmp_path):
    """Knative's activator subsetting on real processes: two activators share the public port,
    each infers its index from the names, balances over its slice of the three receivers (CC 1:
    2 and 1, the remnant to index 0) and sends nowhere else."""
    run = PipelineRun(
        # Three receivers, pinned: the KPA may not add more under the burst (on a busy box it
        # went to 19, and the slices with it).
        spec({"containerConcurrency": 1, "activators": 2}, {"min-scale": 3, "max-scale": 3}, replicas=3),
        tmp_path,
        spark=spark,
    ).start()
    try:
        path = run.requests["in"]
        wait_ready(path, 3)
        wait_for(
            lambda: sum(len(s.get("assigned", [])) for s in path.activator_slices()) == 3,
            120,
            "the three receivers in the activators' slices",
        )
        bodies = [json.dumps([{"n": i, "k": j} for j in range(10)]).encode() for i in range(120)]
        with ThreadPoolExecutor(12) as pool:  # new connections: the kernel spreads them over both
            answers = list(
                pool.map(lambda ib: post(path.url, ib[1], Idempotency_Key=f"two-{ib[0]}"), enumerate(bodies))
            )
        ok = {f"two-{i}/{j}" for i, (status, _) in enumerate(answers) if status == 200 for j in range(10)}
        assert len(ok) == 120 * 10, [a for a in answers if a[0] != 200][:3]

        def sliced() -> list[dict[str, Any]]:
            slices = path.activator_slices()
            assert all(slices), slices  # each activator answered ({} from one that did not)
            return slices

        slices = eventually(sliced, 60, "each activator's slice")
        delivered(run, ok)
    finally:
        run.stop()
    got = lines(tmp_path / "out.jsonl")  # once stopped: nothing doubled since
    assert sorted(s["index"] for s in slices) == [0, 1]
    assert sorted(len(s["assigned"]) for s in slices) == [1, 2]
    assert sorted(s["capacity"] for s in slices) == [1, 2]
    mine = [set(s["assigned"]) for s in slices]
    assert not mine[0] & mine[1]  # no receiver is counted on by both
    for s in slices:
        assert set(s["sent_to"]) <= set(s["assigned"]), s
    assert sum(sum(s["sent_to"].values()) for s in slices) >= 1
    assert sorted(got) == sorted(ok)  # exactly once


def test_with_many_receivers_the_scrape_takes_knatives_sample_and_counts_every_message(spark, tmp_path):
    """Six receivers: each second the run scrapes five of them (``populationMeanSampleSize(6)``)
    and scales the sums up; what was accepted still adds up to every message sent."""
    run = PipelineRun(
        # Six receivers, pinned, whatever the KPA would make of the load.
        spec({"containerConcurrency": 0}, {"min-scale": 6, "max-scale": 6}, replicas=6),
        tmp_path,
        spark=spark,
    ).start()
    try:
        path = run.requests["in"]
        wait_ready(path, 6, timeout=180)
        wait_for(lambda: path.sampled == (5, 6), 120, "a scrape of five receivers of six")
        sampled = path.sampled
        bodies = [json.dumps([{"n": i}]).encode() for i in range(60)]
        with ThreadPoolExecutor(6) as pool:
            answers = list(
                pool.map(lambda ib: post(path.url, ib[1], Idempotency_Key=f"s-{ib[0]}"), enumerate(bodies))
            )
        ok = {f"s-{i}/0" for i, (status, _) in enumerate(answers) if status == 200}
        assert len(ok) == 60
        delivered(run, ok)
    finally:
        run.stop()
    got = lines(tmp_path / "out.jsonl")  # once stopped: nothing doubled since
    assert sampled == (5, 6)
    assert sorted(got) == sorted(ok)


def test_with_auth_token_requests_need_the_bearer_token_and_the_refused_are_counted(
    spark, tmp_path, monkeypatch
):
    monkeypatch.setenv("TIDAL_TEST_HTTP_TOKEN", "s3cret-token")
    http = {"containerConcurrency": 4, "auth": {"token": {"env": "TIDAL_TEST_HTTP_TOKEN"}}}
    run = PipelineRun(
        spec(http, {"min-scale": 1}, replicas=1), tmp_path, spark=spark, trigger_seconds=0.25
    ).start()
    try:
        path = run.requests["in"]
        wait_ready(path, 1)
        assert post(path.url, b'[{"n": 1}]', Idempotency_Key="none")[0] == 401
        assert post(path.url, b'[{"n": 2}]', Idempotency_Key="wrong", Authorization="Bearer nope")[0] == 403
        status, answer = post(
            path.url, b'[{"n": 3}]', Idempotency_Key="right", Authorization="Bearer s3cret-token"
        )
        assert status == 200, answer
        assert delivered(run, {"right/0"}) == ["right/0"]  # nothing of the refused was stored

        def refusals_counted() -> None:
            samples = series(tmp_path)
            assert any(s.get("unauthorized") == 2 for s in samples), "no sample counts both refusals yet"
            assert max(s.get("unauthorized", 0) for s in samples) == 2

        eventually(refusals_counted, 120, "the refused requests counted")
    finally:
        run.stop()
    # A token the spec points at but that is not there stops the run at start, naming it.
    monkeypatch.delenv("TIDAL_TEST_HTTP_TOKEN")
    from tidal import errors

    again = PipelineRun(spec(http), tmp_path / "again", spark=spark)
    with pytest.raises(errors.SpecError, match=r"source.http.auth.token.*TIDAL_TEST_HTTP_TOKEN is empty"):
        try:
            again.start()
        finally:
            again.stop()


T0 = 1_700_000_000  # a multiple of 10: the first window is [T0, T0 + 10 s)


def keyed_counts(run_dir: Path) -> dict[tuple[str, int], int]:
    """``(keys joined by ",", window start ms)`` → the count the reduce delivered (ids
    ``count:<keys>@<start ms>-<end ms>``); fails on a key's window delivered twice."""
    from tidal.testing import delivered as records

    found: dict[tuple[str, int], int] = {}
    for record in records(run_dir / "out.jsonl"):
        key, _, bounds = str(record["id"]).removeprefix("count:").partition("@")
        start = int(bounds.split("-")[0])
        assert (key, start) not in found, f"window {key}@{start} delivered twice"
        found[key, start] = int(record["payload"])
    return found


def test_x_numaflow_keys_are_what_a_keyed_reduce_downstream_groups_by(spark, tmp_path):
    """Numaflow's clients key their messages with ``x-numaflow-keys``: a keyed reduce right after
    the HTTP source counts each key's messages in its window, as Numaflow's would."""
    data = {
        "name": "keyed",
        "controller": {"intervalSeconds": 0.5},
        "vertices": [
            {
                "name": "in",
                "source": {"http": {"bodies": "raw"}},
                "replicas": 1,
                "kpa": {"min-scale": 1, "target": 2, "window": "6s"},
            },
            {
                "name": "count",
                "udf": {
                    "reduce": "tidal.examples.numaflow:ReduceCounter",
                    "reduceArgs": [0],
                    "groupBy": {"window": {"fixed": {"length": "10s"}}, "keyed": True, "allowedLateness": 0},
                },
            },
            {"name": "out", "sink": {"file": {"path": "out.jsonl"}}},
        ],
        "edges": [{"from": "in", "to": "count"}, {"from": "count", "to": "out"}],
    }
    # (the header as a client sends it or None, how many): Numaflow's splitting, trimmed, empty
    # items dropped; no header or an empty one: no keys, the empty key
    sent = [("a", 5), ("b", 3), (" a , b,", 2), (None, 2), ("", 1)]
    want = {("a", T0 * 1000): 5, ("b", T0 * 1000): 3, ("a,b", T0 * 1000): 2, ("", T0 * 1000): 3}
    run = PipelineRun(parse_pipeline(data), tmp_path, spark=spark, trigger_seconds=0.25).start()
    try:
        path = run.requests["in"]
        wait_ready(path, 1)
        n = 0
        for header, count in sent:
            for _ in range(count):
                headers = {"Content_Type": "text/plain", "x_numaflow_id": f"m-{n}"}
                headers["x_numaflow_event_time"] = str(T0 * 1000 + n * 300)  # all in the first window
                if header is not None:
                    headers["x_numaflow_keys"] = header
                status, answer = post(path.url, f"hello {n}".encode(), **headers)
                assert status == 200, answer
                n += 1
        # one message far ahead moves the watermark past the first window: it closes
        status, answer = post(
            path.url, b"late", Content_Type="text/plain", x_numaflow_keys="close",
            x_numaflow_event_time=str((T0 + 25) * 1000),
        )  # fmt: skip
        assert status == 200, answer

        def first_window_counted() -> dict[tuple[str, int], int]:
            run.check()
            got = {k: v for k, v in keyed_counts(tmp_path).items() if k[1] == T0 * 1000}
            assert len(got) >= len(want), f"{len(got)} of {len(want)} keys' windows delivered: {got}"
            return got

        assert eventually(first_window_counted, 300, "the first window's count per key") == want
    finally:
        run.stop()
