"""The run's calls to a receiver agent (``launch._call``) against a real agent on loopback, and
against a host that takes no connection: it must fail within the connect timeout, not the call's
own (a receiver's start waits 35 s for its answer; a host cut off answers no SYN, and one start
sent there held every start of a scale-up for 35 s: tidal bench chaos-receivers)."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest

from tidal.request import launch
from tidal.request.agent import Agent


@pytest.fixture
def agent(tmp_path):
    served = Agent("127.0.0.1", 0, tmp_path / "agent-logs", token="t0ken")
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        served.server.shutdown()
        served.stop()


def test_an_agent_answers_and_a_refusal_says_its_reason(agent):
    listing = launch._call(f"http://{agent.address}/agent", None, 5.0, "t0ken")
    assert listing["receivers"] == {}
    with pytest.raises(RuntimeError) as refused:  # the agent's own answer, said on
        launch._call(f"http://{agent.address}/agent", None, 5.0, "wrong")
    assert str(refused.value)


def test_nobody_listening_is_an_os_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(OSError):
        launch._call(f"http://127.0.0.1:{port}/agent", None, 5.0)


@pytest.mark.timeout(30)  # a deadline: without the connect timeout the call waits its 600 s
def test_a_host_that_takes_no_connection_fails_at_the_connect_timeout_not_the_calls():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    held = []
    try:
        # Fill the accept queue: the kernel then drops the next SYNs, as a host cut off answers none.
        for _ in range(8):
            c = socket.socket()
            c.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                c.connect(listener.getsockname())
            held.append(c)
        with pytest.raises(OSError):
            launch._call(f"http://127.0.0.1:{listener.getsockname()[1]}/receivers", {"x": 1}, 600.0)
    finally:
        for c in held:
            c.close()
        listener.close()
