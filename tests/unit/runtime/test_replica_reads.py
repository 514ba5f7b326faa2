"""Per-replica read counts in the control record (Numaflow's ``getPodReadCounts``): kept with
each committed batch, a replay counted once, only running replicas reported."""

from __future__ import annotations

from tidal.isb.control import ControlStore


def test_each_replica_counts_what_it_read_and_a_replay_is_counted_once(tmp_path):
    control = ControlStore(tmp_path / "c.db")
    control.record_batch("mono", 0, 3, 30, parts=[10, 12, 8])
    control.record_batch("mono", 1, 2, 10, parts=[6, 4])
    control.record_batch("mono", 1, 2, 10, parts=[6, 4])  # a replay of batch 1
    assert control.read_counts("mono", 3) == {"mono-0": 16.0, "mono-1": 16.0, "mono-2": 8.0}
    assert sum(control.read_counts("mono", 3).values()) == control.processed("mono")


def test_only_running_replicas_are_reported_and_a_batch_without_parts_counts_for_replica_0(tmp_path):
    control = ControlStore(tmp_path / "c.db")
    control.record_batch("v", 0, 3, 30, parts=[10, 10, 10])
    control.record_batch("v", 1, 1, 5)
    assert control.read_counts("v", 1) == {"v-0": 15.0}  # replicas 1 and 2 are gone
    assert control.read_counts("v", 3) == {"v-0": 15.0, "v-1": 10.0, "v-2": 10.0}
