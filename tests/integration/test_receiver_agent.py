"""The receiver agent (``tidal agent``) on loopback: it starts receivers bound to its address that
store what they are sent in JetStream, drains them on SIGTERM, refuses a SQLite buffer and an
address not of its host, and an agent that stops answering is a lost host whose receivers count
as gone. The same across real hosts, with a host lost under load: test_hosts.py."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from tidal import errors
from tidal.isb.jetstream import JetStreamStore
from tidal.request import launch
from tidal.request.agent import Agent
from tidal.request.children import get
from tidal.request.launch import LOST_CODE, AgentLauncher, launcher_for
from tidal.request.receiver import ReceiverConfig

from .waits import eventually


@pytest.fixture
def agent(tmp_path: Path):
    served = Agent("127.0.0.1", 0, tmp_path / "agent-logs")
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        served.server.shutdown()
        served.stop()


def post(url: str, body: list[dict[str, object]], key: str) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Idempotency-Key": key},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status, json.loads(answer.read())


def test_an_agent_starts_receivers_that_store_in_jetstream_and_drains_them(agent, nats_server):
    store = JetStreamStore(nats_server.url, "agent")
    store.create("in-out")
    try:
        config = ReceiverConfig(vertex="in", pipeline="agent", outputs=("in-out",), backend="jetstream",
                                url=nats_server.url)  # fmt: skip
        launcher = launcher_for([agent.address], Path("unused"))
        assert isinstance(launcher, AgentLauncher) and not launcher.shares_port
        started = launcher.start(config, 2)
        assert len(started) == 2 and {c.host for c in started} == {"127.0.0.1"}
        for child in started:
            assert get(child.url + "_tidal/ready") == "queue"
            assert child.proc.poll() is None
        status, answer = post(started[0].url, [{"n": 1}, {"n": 2}], "k-1")
        assert status == 200 and answer["ids"] == ["k-1/0", "k-1/1"], answer
        assert [m[1] for m in store.open("in-out").read(0, 10)] == ["k-1/0", "k-1/1"]
        listing = get(f"http://{agent.address}/agent")
        assert set(listing["receivers"]) == {str(c.proc.pid) for c in started}
        started[0].proc.send_signal(signal.SIGTERM)  # drains, exits 0
        assert started[0].proc.wait(timeout=30) == 0
        assert started[1].proc.poll() is None
    finally:
        store.drop("in-out")
        store.close()


def test_an_agent_refuses_a_sqlite_buffer_naming_the_fix(agent, tmp_path):
    config = ReceiverConfig(vertex="in", pipeline="p", outputs=("in-out",), db=str(tmp_path / "b.db"))
    with pytest.raises(RuntimeError, match=r"buffers\.backend: jetstream"):
        launch.AgentClient(agent.address).start(config)
    assert get(f"http://{agent.address}/agent")["receivers"] == {}


def test_an_agent_that_does_not_answer_stops_the_run_at_start_naming_it():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    field = "vertices[in].source.http.receiverHosts"
    with pytest.raises(errors.SpecError) as refused:
        launcher_for([f"127.0.0.1:{port}"], Path("unused"), field)
    text = str(refused.value)
    assert field in text and f"tidal agent --listen 127.0.0.1:{port}" in text, text


def test_an_agent_given_an_address_not_of_its_host_says_so_and_exits():
    done = subprocess.run(
        [sys.executable, "-m", "tidal", "agent", "--listen", "192.0.2.7:7171"],  # TEST-NET-1: nobody's
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "cannot listen on 192.0.2.7:7171" in done.stderr and "address of this host" in done.stderr, (
        done.stderr
    )
    bad = subprocess.run([sys.executable, "-m", "tidal", "agent", "--listen", "7171"], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    assert bad.returncode == 2 and "is not HOST:PORT" in bad.stderr, bad.stderr


def test_an_agent_silent_for_longer_than_lost_after_is_a_lost_host_until_it_answers_again(
    agent, nats_server, monkeypatch
):
    monkeypatch.setattr(launch, "LOST_AFTER", 0.5)
    store = JetStreamStore(nats_server.url, "lost")
    store.create("in-out")
    try:
        config = ReceiverConfig(vertex="in", pipeline="lost", outputs=("in-out",), backend="jetstream",
                                url=nats_server.url)  # fmt: skip
        launcher = AgentLauncher([agent.address])
        [child] = launcher.start(config, 1)
        assert child.proc.poll() is None
        agent.server.shutdown()  # the agent stops answering: its host, as the run sees it, is gone
        agent.server.server_close()

        def called_lost() -> None:
            """The receiver's exit code, asked of the agent, is the lost host's once it is silent."""
            assert child.proc.poll() == LOST_CODE and launcher.agents[0].lost, (
                child.proc.poll(),
                launcher.agents[0].lost,
            )

        eventually(called_lost, 60, "the silent agent's host called lost")
        assert launcher.start(config, 1) == []  # no host left to start on
        # The host comes back (an agent on the same address): it takes receivers again.
        back = Agent("127.0.0.1", agent.port, agent.log_dir)
        threading.Thread(target=back.server.serve_forever, daemon=True).start()
        try:

            def started_again() -> list:
                """A lost host is asked again every 2 s: a start finds it back, and starts there."""
                started = launcher.start(config, 1)
                assert started, "no receiver started: the host is not back yet"
                return started

            started = eventually(started_again, 60, "a receiver started on the host back", poll=0.5)
            assert len(started) == 1 and not launcher.agents[0].lost
            assert get(started[0].url + "_tidal/ready") == "queue"
        finally:
            back.server.shutdown()
            back.stop()
    finally:
        store.drop("in-out")
        store.close()


def test_an_agent_with_a_token_refuses_a_run_without_it_and_serves_one_with_it(tmp_path, nats_server):
    served = Agent("127.0.0.1", 0, tmp_path / "logs", token="s3cret")
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    store = JetStreamStore(nats_server.url, "tokened")
    store.create("in-out")
    try:
        field = "vertices[in].source.http.receiverHosts"
        for wrong in (None, "guess"):
            with pytest.raises(errors.SpecError) as refused:
                launcher_for([served.address], Path("unused"), field, wrong)
            assert "refused the run" in str(refused.value) and "agentToken" in str(refused.value)
        config = ReceiverConfig(vertex="in", pipeline="tokened", outputs=("in-out",), backend="jetstream",
                                url=nats_server.url)  # fmt: skip
        [child] = launcher_for([served.address], Path("unused"), field, "s3cret").start(config, 1)
        assert get(child.url + "_tidal/ready") == "queue" and child.proc.poll() is None
    finally:
        served.server.shutdown()
        served.stop()
        store.drop("in-out")
        store.close()
