"""An HTTP source whose receivers run on two worker hosts behind the activator (receiver agents,
``source.http.receiverHosts``), buffers on a JetStream cluster of three more. Losing one receiver
host under load (every process SIGKILLed, its link down) loses no acknowledged message and
doubles none: the run calls the host lost, the activator cuts what was in flight there and stops
sending to it, and the receivers come back on the host left. The scenario is the benchmark's
(tidal bench receivers), which also measures what the clients saw."""

from __future__ import annotations

import pytest

from tidal.bench.receiver_hosts import run_receiver_loss
from tidal.rig import unavailable

from .test_cli import output

REASON = unavailable()
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(REASON is not None, reason=f"no multi-host rig here: {REASON}"),
]


@pytest.mark.long
def test_losing_a_receiver_host_under_http_load_delivers_every_acknowledged_message_once(tmp_path):
    r = run_receiver_loss(tmp_path, requests=1000, rate=80.0)
    # Every request was answered 200 in the end (retried with its key), and each of its
    # messages reached the sink once.
    assert r["answered"] == 1000 and r["gave_up"] == 0, r
    assert len(r["ids"]) == len(set(r["ids"])), "a message was delivered twice"
    assert set(r["ids"]) == set(r["expected"]) and len(r["expected"]) == 10_000
    # What was in flight to the lost host was cut with a 502 the client retried, not left to wait
    # for its own timeout (30 s: without the cut, one did).
    assert "TimeoutError" not in r["failed_attempts"], r["failed_attempts"]
    # The run called the host lost and brought two receivers back, on the host left.
    assert r["called_lost_after"] is not None and r["ready_again_after"] is not None, r
    code, text = output("events", r["run_dir"])
    assert code == 0 and "receiver lost" in text and r["lost_host"] in " ".join(text.split()), text
    log = (tmp_path / "run" / "tidal.log").read_text().splitlines()
    ready = [line for line in log if "receiver pid" in line and "ready on" in line]
    lost = next(i for i, line in enumerate(log) if "lost" in line and r["lost_host"] in line)
    assert any(r["kept_host"] in line for line in ready[-2:]), ready  # the last ones started
    before = " ".join(line for line in log[:lost] if "ready on" in line)
    assert r["kept_host"] in before and r["lost_host"] in before, before  # spread over both at first
