"""The buffer servers' watch: a replica unheard for SILENT_AFTER is one fault per server, with the
buffers it keeps and their leaders; its return is another; a look mid-election is skipped."""

from __future__ import annotations

from tidal.controller.faults import FaultLog, read_faults
from tidal.spark.buffer_watch import SILENT_AFTER, BufferWatch


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
