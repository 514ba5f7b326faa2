"""The buffer servers' watch: a replica unheard for SILENT_AFTER is one fault per server, with the
buffers it keeps and their leaders; its return is another; a look mid-election is skipped; the
last look, at stop, still counts; a replica a new leader never heard is unheard since the election."""

from __future__ import annotations

from datetime import UTC, datetime

from nats.js.api import ClusterInfo, PeerInfo

from tidal.controller.faults import FaultLog, read_faults
from tidal.isb.jetstream import unheard_seconds
from tidal.spark.run.buffer_watch import SILENT_AFTER, BufferWatch


class ScriptedStore:
    """What JetStream's stream info said, look by look (the real one: test_hosts on the rig)."""

    def __init__(self, looks: list[dict[str, tuple[str | None, dict[str, float]] | None]]) -> None:
        self.looks, self.look = looks, 0

    def replica_view(self, name: str) -> tuple[str | None, dict[str, float]]:
        seen = self.looks[self.look][name]
        if seen is None:
            raise TimeoutError("no leader: an election")
        return seen


def test_a_silent_server_is_one_fault_naming_its_buffers_and_its_return_another(tmp_path):
    quiet = SILENT_AFTER + 2
    looks = [
        {"a": ("n1", {"n2": 0.1, "n3": 0.2}), "b": ("n2", {"n1": 0.1, "n3": 0.3})},
        {"a": ("n1", {"n2": 0.1, "n3": quiet}), "b": None},  # n3 silent; b mid-election
        {"a": ("n1", {"n2": 0.1, "n3": quiet + 2}), "b": ("n2", {"n1": 0.1, "n3": quiet + 2})},
        {"a": ("n1", {"n2": 0.1, "n3": 0.5}), "b": ("n2", {"n1": 0.1, "n3": 0.4})},
    ]
    store = ScriptedStore(looks)
    watch = BufferWatch(store, ["a", "b"], FaultLog(tmp_path / "faults.jsonl"))
    for at in range(len(looks)):
        store.look = at
        watch.check(float(at))
    faults = read_faults(tmp_path)
    assert [(f["kind"], f["server"], f["at"]) for f in faults] == [
        ("buffer server silent", "n3", 1.0),  # once, though it stayed silent at the next look
        ("buffer server back", "n3", 3.0),
    ]
    assert f"unheard for {quiet:.0f} s" in faults[0]["reason"] and "a: n1" in faults[0]["reason"]
    assert all(f["who"] == "(buffers)" for f in faults)


def test_a_server_lost_in_the_last_seconds_is_on_the_record_from_the_last_look(tmp_path):
    store = ScriptedStore([{"a": ("n1", {"n2": SILENT_AFTER + 1, "n3": 0.1})}])
    watch = BufferWatch(store, ["a"], FaultLog(tmp_path / "faults.jsonl")).start()
    watch.stop()  # long before its first look (WATCH_EVERY): the last look is the only one
    assert [(f["kind"], f["server"]) for f in read_faults(tmp_path)] == [("buffer server silent", "n2")]


def _cluster(leader_since: object, *replicas: tuple[str, float, bool]) -> ClusterInfo:
    peers = [PeerInfo(name=n, active=int(seconds * 1e9), current=current) for n, seconds, current in replicas]
    return ClusterInfo(leader="n1", leader_since=leader_since, replicas=peers)


def test_a_replica_never_heard_by_a_leader_elected_since_is_unheard_since_the_election():
    # As nats-server 2.15 reports it when the dead server led the stream: the new leader never
    # heard from it (active 0, not current); the live follower is current.
    elected = datetime(2026, 11, 26, 16, 33, 6, tzinfo=UTC)
    now = elected.timestamp() + 12.5
    seen = unheard_seconds(_cluster(elected, ("n2", 0.0, False), ("n3", 0.4, True)), now)
    assert seen == {"n2": 12.5, "n3": 0.4}
    # The same as JSON text; a current replica at 0 s is just heard; no election time: 0.
    assert unheard_seconds(_cluster("2026-11-26T16:33:06Z", ("n2", 0.0, False)), now) == {"n2": 12.5}
    assert unheard_seconds(_cluster(elected, ("n2", 0.0, True)), now) == {"n2": 0.0}
    assert unheard_seconds(_cluster(None, ("n2", 0.0, False)), now) == {"n2": 0.0}
    assert unheard_seconds(_cluster(elected, ("n2", 7.0, False)), now) == {"n2": 7.0}
