"""The multi-host rig itself (tidal.rig): hosts on their own addresses reach each other and nothing
else; a lost host, a pulled cable, a slow and a lossy link do what they say; nothing is left."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tidal.rig import Impairment, Rig, unavailable

REASON = unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no multi-host rig here: {REASON}")

# A TCP echo server, and a client that prints its round trips (the first connects).
ECHO = """
import socket, sys
s = socket.create_server((sys.argv[1], 7000))
print("LISTENING", flush=True)
while True:
    c, _ = s.accept()
    while (data := c.recv(65536)):
        c.sendall(data)
    c.close()
"""
PING = """
import json, socket, sys, time
c = socket.create_connection((sys.argv[1], 7000), timeout=float(sys.argv[3]))
rtts = []
for _ in range(int(sys.argv[2])):
    t = time.monotonic(); c.sendall(b"x" * 100); got = b""
    while len(got) < 100:
        got += c.recv(100 - len(got))
    rtts.append(time.monotonic() - t)
print(json.dumps(rtts))
"""
# UDP datagrams one way: how many of them arrive. The count ends after 3 s without one, counted
# from the first: the sender is a new Python on a busy box, and may take longer than that to start.
UDP_SINK = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 7001)); s.settimeout(120)
print("LISTENING", flush=True)
n = 0
try:
    while True:
        s.recv(100); n += 1; s.settimeout(3)
except socket.timeout:
    print(n, flush=True)
"""
UDP_SEND = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])):
    s.sendto(b"y" * 50, (sys.argv[1], 7001)); time.sleep(0.001)
"""


def listening(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "LISTENING", line + (proc.stderr.read() if proc.stderr else "")


def rtts(rig: Rig, client: str, server: str, count: int = 5, timeout: float = 10) -> list[float]:
    done = rig[client].run([sys.executable, "-c", PING, rig[server].address, str(count), str(timeout)])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_hosts_reach_each_other_a_lost_host_and_a_pulled_cable_cut_it_off_and_nothing_is_left():
    rig = Rig(["a", "b"])
    with rig:
        a, b = rig["a"], rig["b"]
        assert a.address != b.address and a.address.startswith("10.")
        echo = b.popen([sys.executable, "-c", ECHO, b.address], stdout=subprocess.PIPE, text=True)
        listening(echo)
        assert len(rtts(rig, "a", "b")) == 5
        # Nothing outside the bridge: not the machine's loopback, not another network.
        outside = a.run([sys.executable, "-c", "import socket; socket.create_connection(('1.1.1.1', 80), 2)"])
        assert outside.returncode != 0 and "unreachable" in outside.stderr.lower()
        b.link(False)  # a pulled cable: the server runs, nobody reaches it
        cut = a.run([sys.executable, "-c", PING, b.address, "1", "2"])
        assert cut.returncode != 0
        assert echo.poll() is None
        b.link(True)
        assert len(rtts(rig, "a", "b", count=1)) == 1
        killed = b.kill()  # the host is lost: everything on it, at once
        assert echo.pid in killed or echo.wait(timeout=10) is not None
        assert echo.wait(timeout=10) == -9
        assert b.pids() == []
    names = subprocess.run(["ip", "netns", "list"], check=False, capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], check=False, capture_output=True, text=True).stdout
    assert rig.tag not in names and rig.bridge not in links


def test_a_slow_link_delays_what_its_host_sends_and_a_lossy_one_drops_frames():
    impaired = {"slow": Impairment(delay=0.2), "lossy": Impairment(loss=0.05)}
    rig = Rig(["a", "slow", "lossy"], impaired=impaired)
    with rig:
        for name in ("slow", "lossy"):
            echo = rig[name].popen(
                [sys.executable, "-c", ECHO, rig[name].address], stdout=subprocess.PIPE, text=True
            )
            listening(echo)
        # Every round trip to the slow host crosses its link once outbound: at least 200 ms.
        slow = rtts(rig, "a", "slow")
        assert min(slow) >= 0.2, slow
        # TCP over the lossy link still delivers every byte (retransmits); UDP loses datagrams.
        assert len(rtts(rig, "a", "lossy", count=50, timeout=30)) == 50
        sink = rig["lossy"].popen(
            [sys.executable, "-c", UDP_SINK, rig["lossy"].address], stdout=subprocess.PIPE, text=True
        )
        listening(sink)
        sent = 1000
        done = rig["a"].run([sys.executable, "-c", UDP_SEND, rig["lossy"].address, str(sent)])
        assert done.returncode == 0, done.stderr
        out, _ = sink.communicate(timeout=180)
        got = int(out.split()[-1])
        # 5 % of 1,000 each way: all 1,000 arriving has a probability of 0.95^1000 (about 5e-23).
        assert 0 < got < sent, got
    links = subprocess.run(["ip", "-o", "link", "show"], check=False, capture_output=True, text=True).stdout
    assert f"tv{rig.tag}" not in links and rig.bridge not in links
