"""One conformance suite for every buffer backend: real SQLite files and a real nats-server."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tidal import errors
from tidal.isb import BufferLimits

from . import isb_workers
from .waits import eventually

pytestmark = pytest.mark.nats


@pytest.fixture(params=["sqlite", "jetstream"])
def backend(request, tmp_path, nats_server):
    kind = request.param
    where = str(tmp_path / "pipeline.db") if kind == "sqlite" else nats_server.url
    store = isb_workers.open_store(kind, where)
    yield kind, where, store
    for name in store.list():
        store.drop(name)
    store.close()


def payloads(n: int, tag: str = "m") -> tuple[list[bytes], list[str]]:
    return [f"{tag}{i}".encode() for i in range(n)], [f"{tag}-{i}" for i in range(n)]


def test_append_read_commit_and_stats(backend):
    _, _, store = backend
    buf = store.create("b1", BufferLimits(max_length=100, usage_limit=0.8))
    r = buf.append(*payloads(10))
    assert (r.first_seq, r.last_seq, r.appended, r.duplicates) == (1, 10, 10, 0)
    got = buf.read(after=0, limit=4)
    assert [seq for seq, _, _ in got] == [1, 2, 3, 4]
    assert [payload for _, _, payload in got] == [b"m0", b"m1", b"m2", b"m3"]
    assert got[0][1] == "m-0"
    s = buf.stats()
    assert (s.last_seq, s.committed, s.pending, s.length) == (10, 0, 10, 10)
    assert s.usage == pytest.approx(0.1) and not s.full
    buf.commit(4)
    s = buf.stats()
    assert (s.committed, s.pending, s.length) == (4, 6, 6)
    assert [seq for seq, _, _ in buf.read(0, 100)] == list(range(5, 11))


def test_replay_of_a_range_returns_the_same_messages(backend):
    _, _, store = backend
    buf = store.create("replay")
    buf.append(*payloads(50))
    first = buf.read_range(11, 30)
    again = buf.read_range(11, 30)
    assert first == again and [seq for seq, _, _ in first] == list(range(11, 31))
    buf.commit(30)
    assert [seq for seq, _, _ in buf.read(10, 5)] == [31, 32, 33, 34, 35]


def test_duplicate_ids_are_stored_once_even_after_trim(backend):
    _, _, store = backend
    buf = store.create("dups")
    assert buf.append([b"a", b"b"], ["x", "y"]).appended == 2
    r = buf.append([b"a", b"b", b"c"], ["x", "y", "z"])
    assert (r.appended, r.duplicates) == (1, 2)
    buf.commit(buf.last_seq())
    r = buf.append([b"a", b"d"], ["x", "w"])  # x was committed and trimmed: still a duplicate
    assert (r.appended, r.duplicates) == (1, 1)
    assert [mid for _, mid, _ in buf.read(0, 10)] == ["w"]


def test_an_id_repeated_within_one_batch_is_stored_once(backend):
    _, _, store = backend
    buf = store.create("repeats")
    r = buf.append([b"a", b"b", b"c"], ["x", "y", "x"])
    assert (r.appended, r.duplicates) == (2, 1)
    assert [(mid, payload) for _, mid, payload in buf.read(0, 10)] == [("x", b"a"), ("y", b"b")]


def test_batch_that_would_overflow_is_refused_whole(backend):
    _, _, store = backend
    buf = store.create("small", BufferLimits(max_length=10))
    buf.append(*payloads(8))
    with pytest.raises(errors.BufferFull) as err:
        buf.append(*payloads(3, "n"))
    assert "buffer 'small' is full" in str(err.value)
    assert buf.stats().length == 8
    assert [mid for _, mid, _ in buf.read(0, 20)] == [f"m-{i}" for i in range(8)]
    buf.commit(5)
    assert buf.append(*payloads(3, "n")).appended == 3  # room again after the reader commits


def test_full_flag_follows_usage_limit(backend):
    _, _, store = backend
    buf = store.create("usage", BufferLimits(max_length=10, usage_limit=0.5))
    buf.append(*payloads(4))
    assert not buf.stats().full
    buf.append(*payloads(1, "z"))
    assert buf.stats().full and buf.stats().usage == 0.5


def test_reader_that_restarts_resumes_from_last_commit(backend):
    kind, where, store = backend
    buf = store.create("resume")
    buf.append(*payloads(20))
    buf.commit(7)
    fresh = isb_workers.open_store(kind, where)
    try:
        again = fresh.open("resume")
        assert again.stats().committed == 7
        assert again.read(again.stats().committed, 3)[0][0] == 8
        assert again.limits == buf.limits
    finally:
        fresh.close()


def test_two_writer_processes_at_once(backend):
    kind, where, store = backend
    buf = store.create("two", BufferLimits(max_length=100_000))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.starmap(
            isb_workers.write_batches,
            [(kind, where, "two", "w1", 20, 200), (kind, where, "two", "w2", 20, 200)],
        )
    assert results == [4000, 4000]
    messages = buf.read(0, 10_000)
    assert len(messages) == 8000
    assert len({mid for _, mid, _ in messages}) == 8000
    assert [seq for seq, _, _ in messages] == list(range(1, 8001))
    assert buf.stats().pending == 8000


def test_pending_and_usage_under_concurrent_use(backend):
    kind, where, store = backend
    buf = store.create("busy", BufferLimits(max_length=100_000))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        job = pool.apply_async(isb_workers.write_batches, (kind, where, "busy", "w", 30, 100))
        committed = 0
        while not job.ready():
            got = buf.read(committed, 150)
            if got:
                committed = got[-1][0]
                buf.commit(committed)
            s = buf.stats()
            assert s.pending == s.last_seq - s.committed >= 0
        assert job.get() == 3000
    s = buf.stats()
    assert s.last_seq == 3000
    assert s.pending == 3000 - s.committed == s.length


@pytest.mark.parametrize("mode", ["append", "keyed"])
def test_writer_killed_mid_batch_leaves_no_half_batch(backend, tmp_path, mode):
    kind, where, store = backend
    buf = store.create("kill", BufferLimits(max_length=50_000))
    size = 1000
    proc = subprocess.Popen(
        [sys.executable, isb_workers.__file__, kind, where, "kill", str(size), mode],
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(Path(isb_workers.__file__).parent),
    )
    try:
        seen = 0

        def going() -> None:
            """The writer prints each batch number once stored (a read blocks for the next)."""
            nonlocal seen
            line = proc.stdout.readline()
            if line:
                seen = int(line)
            assert seen >= 5, f"writer did not get going: {seen} batches stored"

        eventually(going, 120, "the writer's fifth batch", proc=proc, poll=0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    counts = Counter(mid.split("-")[0] for _, mid, _ in buf.read(buf.stats().committed, 100_000))
    assert counts, "nothing stored"
    assert set(counts.values()) == {size}, f"partial batches: {counts}"


def test_a_batch_key_is_stored_once_even_after_trim(backend):
    _, _, store = backend
    buf = store.create("keys")
    r = buf.append_batch("v:1-3", ["a", "b", "c"], [b"A", b"B", b"C"])
    assert (r.first_seq, r.last_seq, r.appended, r.duplicates) == (1, 3, 3, 0)
    r = buf.append_batch("v:1-3", ["a", "b", "c"], [b"A", b"B", b"C"])  # a replayed task
    assert (r.appended, r.duplicates) == (0, 3)
    buf.commit(3)
    assert (
        buf.append_batch("v:1-3", ["a", "b", "c"], [b"A", b"B", b"C"]).appended == 0
    )  # trimmed: still known
    r = buf.append_batch("v:4-5", ["a", "d"], [b"A2", b"D"])  # ids may repeat across batches
    assert (r.first_seq, r.last_seq, r.appended) == (4, 5, 2)
    assert [(seq, mid, p) for seq, mid, p in buf.read(0, 10)] == [(4, "a", b"A2"), (5, "d", b"D")]


def test_append_stores_keys_as_append_batch_does_and_a_replay_keeps_the_first_ones(backend):
    """An HTTP source's ``x-numaflow-keys`` reach the buffer through ``append``: read back in
    ``read_batch``'s keys column, per message, null for none, also on the replay path."""
    _, _, store = backend
    buf = store.create("appendkeys")
    r = buf.append([b"a", b"b", b"c", b"d"], ["a", "b", "c", "d"], None, [["k1"], ["k1", "k2"], None, []])
    assert (r.appended, r.duplicates) == (4, 0)
    # a replay holding known ids (another request's keys for "b"): only "e" is new, with its keys
    r = buf.append([b"b", b"e"], ["b", "e"], [5.0, 6.0], [["other"], ["k3"]])
    assert (r.appended, r.duplicates) == (1, 1)
    buf.append([b"f"], ["f"])  # without keys: none
    batch = buf.read_batch(1, 6)
    assert batch.column("id").to_pylist() == ["a", "b", "c", "d", "e", "f"]
    assert batch.column("keys").to_pylist() == [["k1"], ["k1", "k2"], None, [], ["k3"], None]
    assert batch.column("t").to_pylist()[4] == 6.0
    with pytest.raises(TypeError, match="keys"):
        buf.append([b"g", b"h"], ["g", "h"], None, [["k"]])
    assert buf.last_seq() == 6  # the refused batch stored nothing


def test_read_batch_is_arrow_and_matches_read_range_across_batches(backend):
    import pyarrow as pa

    _, _, store = backend
    buf = store.create("arrow")
    before = time.time()
    buf.append(*payloads(5))  # seqs 1..5, entering the pipeline now
    times = pa.array([1000.0 + i for i in range(5)])  # source times kept from upstream
    keys = [["even"], ["odd"], None, [], ["a", "b"]]  # Numaflow's message keys: none is null
    buf.append_batch(
        "k", pa.array([f"b-{i}" for i in range(5)]), pa.array([b"p%d" % i for i in range(5)]), times, keys
    )
    batch = buf.read_batch(3, 8)
    assert batch.schema.names == ["seq", "id", "payload", "t", "keys"]
    assert batch.column("keys").to_pylist() == [None, None, None, ["even"], ["odd"], None]
    assert buf.read_batch(9, 10).column("keys").to_pylist() == [[], ["a", "b"]]
    assert batch.column("seq").to_pylist() == [3, 4, 5, 6, 7, 8]
    assert batch.column("id").to_pylist() == ["m-2", "m-3", "m-4", "b-0", "b-1", "b-2"]
    stamps = batch.column("t").to_pylist()
    assert all(before <= t <= time.time() for t in stamps[:3])
    assert stamps[3:] == [1000.0, 1001.0, 1002.0]
    assert list(zip(*(c.to_pylist() for c in batch.columns[:3]), strict=True)) == buf.read_range(3, 8)
    buf.commit(4)  # inside the first batch: what is committed is never read again
    assert buf.read_batch(1, 6).column("seq").to_pylist() == [5, 6]
    assert [seq for seq, _, _ in buf.read(0, 3)] == [5, 6, 7]
    assert (buf.stats().length, buf.stats().pending) == (6, 6)
    assert buf.read_batch(20, 30).num_rows == 0


def test_a_keyed_batch_that_would_overflow_is_refused_whole(backend):
    _, _, store = backend
    buf = store.create("small-keyed", BufferLimits(max_length=10))
    buf.append_batch("one", [f"a{i}" for i in range(8)], [b"x"] * 8)
    with pytest.raises(errors.BufferFull):
        buf.append_batch("two", [f"b{i}" for i in range(3)], [b"y"] * 3)
    assert buf.stats().length == 8
    buf.commit(5)
    assert (
        buf.append_batch("two", [f"b{i}" for i in range(3)], [b"y"] * 3).appended == 3
    )  # the key was not spent


def test_errors_are_clear(backend):
    _, _, store = backend
    with pytest.raises(errors.BufferNotFound, match="'nope' does not exist"):
        store.open("nope")
    with pytest.raises(errors.BufferNotFound):
        store.drop("nope")
    buf = store.create("types")
    with pytest.raises(TypeError, match="payloads must be bytes"):
        buf.append(["text"], ["id"])
    with pytest.raises(TypeError, match="one id per message"):
        buf.append([b"a", b"b"], ["only-one"])
    with pytest.raises(TypeError, match="one id per message"):
        buf.append_batch("k", ["only-one"], [b"a", b"b"])
    with pytest.raises(TypeError, match="key must be a non-empty str"):
        buf.append_batch("", ["a"], [b"a"])


def test_list_and_drop(backend):
    _, _, store = backend
    store.create("a")
    store.create("b")
    assert {"a", "b"} <= set(store.list())
    store.drop("a")
    assert "a" not in store.list()


def test_sqlite_rejects_bad_buffer_names(tmp_path):
    from tidal.isb.sqlite import SqliteStore

    with pytest.raises(errors.SpecError, match="invalid buffer name"):
        SqliteStore(tmp_path / "x.db").create('bad"; DROP TABLE')


def test_jetstream_unreachable_names_the_url():
    from tidal.isb.jetstream import JetStreamStore

    with pytest.raises(errors.BufferUnavailable, match=r"nats://127\.0\.0\.1:1"):
        JetStreamStore("nats://127.0.0.1:1", "p")


def test_jetstream_message_too_large(nats_server):
    from tidal.isb.jetstream import JetStreamStore

    store = JetStreamStore(nats_server.url, "big")
    try:
        buf = store.create("huge")
        with pytest.raises(errors.MessageTooLarge, match="larger than"):
            buf.append([b"x" * (2 * 1024 * 1024)], ["one"])
        assert buf.stats().length == 0
    finally:
        store.drop("huge")
        store.close()


def test_jetstream_data_survives_a_server_restart(tmp_path):
    from tidal.isb.jetstream import JetStreamStore
    from tidal.isb.natsd import NatsServer

    server = NatsServer(tmp_path / "nats").start()
    try:
        store = JetStreamStore(server.url, "durable")
        buf = store.create("keep")
        buf.append(*payloads(100))
        buf.commit(40)
        store.close()
        port = server.port
        server.stop()
        server = NatsServer(tmp_path / "nats", port=port).start()
        store = JetStreamStore(server.url, "durable")
        again = store.open("keep")
        s = again.stats()
        assert (s.last_seq, s.committed, s.length) == (100, 40, 60)
        assert again.read(40, 1)[0][2] == b"m40"
        store.close()
    finally:
        server.stop()


def test_one_sqlite_store_used_from_several_threads_at_once(tmp_path):
    """The runner reads stats in its main thread while the controller samples in its own."""
    import threading

    from tidal.isb.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "p.db")
    buffer = store.create("b", BufferLimits(max_length=1_000_000))
    failures: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(200):
                buffer.append([b"x"], [f"{k}-{i}"])
                buffer.stats()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert buffer.stats().last_seq == 800
    store.close()


def test_jetstream_publishes_a_batch_again_when_no_server_took_it(nats_server, monkeypatch):
    """'No responders' says no server took the message (seen on the rig, under load, on a new
    stream's first append): the batch is published again, and stored once. The fault is injected
    into the real connection's first publish; the server and every other call are real."""
    import nats.errors

    from tidal.isb.jetstream import JetStreamStore

    store = JetStreamStore(nats_server.url, "answered")
    try:
        buf = store.create("late")
        connection = store.nc
        real = connection.request
        refused: list[str] = []

        async def first_refused(subject, *args, **kwargs):
            if not refused and not subject.startswith("$JS."):  # the publish, not an API call
                refused.append(subject)
                raise nats.errors.NoRespondersError
            return await real(subject, *args, **kwargs)

        monkeypatch.setattr(connection, "request", first_refused)
        result = buf.append(*payloads(50))
        assert refused, "the fault was not injected"
        assert (result.appended, result.first_seq, result.last_seq) == (50, 1, 50)
        assert [m[1] for m in buf.read(0, 100)] == [f"m-{i}" for i in range(50)]  # each once
    finally:
        store.drop("late")
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "jetstream"])
def test_a_batch_replayed_after_its_messages_were_committed_and_the_store_restarted_is_skipped(
    kind, tmp_path
):
    """A driver restart replays the batch whose Spark commit did not survive, after a downstream
    commit purged its messages. JetStream forgets a purged message's ``Nats-Msg-Id`` when its
    server restarts (nats-io/nats-server #3272): without Tidal's own markers the batch was
    appended again (CI, stop 66: 150 ids delivered twice after a power cut)."""
    from tidal.isb.natsd import NatsServer

    server = NatsServer(tmp_path / "nats").start() if kind == "jetstream" else None
    where = str(tmp_path / "pipeline.db") if server is None else str(server.url)
    try:
        store = isb_workers.open_store(kind, where)
        buf = store.create("b")
        ids = [f"m{i}" for i in range(5)]
        assert buf.append_batch("up/7:0-5", ids, [i.encode() for i in ids]).appended == 5
        buf.commit(5)  # downstream read and committed them: purged
        store.close()
        if server is not None:
            server.stop()
            server = NatsServer(tmp_path / "nats").start()
            where = str(server.url)
        store = isb_workers.open_store(kind, where)
        buf = store.open("b")
        again = buf.append_batch("up/7:0-5", ids, [i.encode() for i in ids])
        assert (again.appended, again.duplicates) == (0, 5)
        assert buf.stats().pending == 0
        fresh = buf.append_batch("up/8:5-6", ["m5"], [b"m5"])  # a new batch still goes in
        assert fresh.appended == 1 and buf.stats().pending == 1
        store.drop("b")  # and a buffer made again under the same name starts with no batches
        buf = store.create("b")
        assert buf.append_batch("up/7:0-5", ids, [i.encode() for i in ids]).appended == 5
        store.close()
    finally:
        if server is not None:
            server.stop()
