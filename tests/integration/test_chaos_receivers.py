"""A receiver host cut while the HTTP source's receivers scale up (issue #57): the scenario of
``tidal bench chaos-receivers``. A step in request rate makes the KPA scale the receivers up;
inside that scale-up receiver host r2 is cut (link down, every process SIGKILLed). Every message
of every request answered 2xx reaches the sink once; the ready receivers drop in the scale-up
only inside the cut's window, by no more than the receivers the run called lost there, and the
run says so in its fault log; the pipeline delivers again and its in-flight requests come back
under their level at the cut."""

from __future__ import annotations

import pytest

from tidal.bench.chaos_receivers import run_receiver_cut
from tidal.controller.faults import read_faults
from tidal.rig import unavailable

REASON = unavailable()
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(REASON is not None, reason=f"no multi-host rig here: {REASON}"),
]


@pytest.mark.long
def test_a_receiver_host_cut_inside_the_receivers_scale_up_loses_nothing_and_recovers(tmp_path):
    r = run_receiver_cut(tmp_path, seed=1)
    assert r["gave_up"] == 0 and r["answered"] == 4000, r
    assert r["held"]["exactly_once"], r["violations"]
    assert r["numbers"]["exactly_once"]["delivered"] == 40_000, r["numbers"]
    # The cut came inside a scale-up of the receivers, and the replicas held but for what it took.
    assert r["numbers"]["no_drop_in_scale_up"]["scale_ups"] >= 1, r["numbers"]
    assert r["held"]["no_drop_in_scale_up"], r["violations"]
    assert r["receivers_lost"] >= 1, r  # the run called what it lost, in its fault log
    kinds = {f["kind"] for f in read_faults(r["run_dir"])}
    assert {"receiver lost", "injected: receiver host cut"} <= kinds, kinds
    rec = r["recovery"][0]
    assert rec["first_delivery_s"] is not None and rec["backlog_back_s"] is not None, rec
