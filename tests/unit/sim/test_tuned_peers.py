"""A peer's own knobs reach it (``tuning``), and the tuned bench keeps the setting that runs
behind least (issue #61: changes compared at no more breaches)."""

from __future__ import annotations

import dataclasses

import pytest

from tidal.bench import decisions_tuned
from tidal.sim import make_trace, reference_pipeline, score, simulate
from tidal.sim.model import default_models
from tidal.sim.peers import Ds2Policy
from tidal.sim.run import make_policies

SPEC = reference_pipeline()
MODELS = default_models(SPEC)


def test_ds2_knobs_reach_every_vertex() -> None:
    trace = make_trace("step-x2", 0)
    policies, _ = make_policies("ds2", SPEC, MODELS, trace, tuning={"target_utilization": 0.5})
    assert {v: p.target for v, p in policies.items() if isinstance(p, Ds2Policy)} == {
        "in": 0.5, "work": 0.5, "out": 0.5,
    }  # fmt: skip


def test_flink_knobs_reach_the_job() -> None:
    trace = make_trace("step-x2", 0)
    policies, _ = make_policies("flink", SPEC, MODELS, trace, tuning={"metrics_window": 30.0})
    jobs = {id(p.job) for p in policies.values()}  # type: ignore[attr-defined]
    assert len(jobs) == 1  # one job, as Flink rescales
    assert next(iter(policies.values())).job.options.metrics_window == 30.0  # type: ignore[attr-defined]


def test_an_unknown_knob_is_named_with_the_ones_there_are() -> None:
    trace = make_trace("step-x2", 0)
    with pytest.raises(
        ValueError, match=r"ds2 has no knob target_utilisation; its knobs: .*target_utilization"
    ):
        make_policies("ds2", SPEC, MODELS, trace, tuning={"target_utilisation": 0.5})
    with pytest.raises(ValueError, match="policy 'tidal' takes none"):
        make_policies("tidal", SPEC, MODELS, trace, tuning={"utilization": 0.5})


def test_the_setting_kept_runs_behind_least() -> None:
    grid = {"utilization_target": (0.5, 0.9), "metrics_window": (30.0,)}
    tuned = decisions_tuned.tune("step-x2", "flink", grid)
    trace = make_trace("step-x2", 0)
    each = {
        u: score(simulate(SPEC, trace, "flink", tuning={"utilization_target": u, "metrics_window": 30.0}))
        for u in grid["utilization_target"]
    }
    assert tuned.tried == 2
    assert tuned.scores.behind == min(s.behind for s in each.values())
    assert each[0.5].behind != each[0.9].behind  # the knob changed what the peer did
    assert tuned.scores == each[tuned.tuning["utilization_target"]]


def test_the_verdict_needs_half_the_changes_and_no_more_behind() -> None:
    ours = dataclasses.replace(score(simulate(SPEC, make_trace("step-x2", 0), "tidal")), behind=0.02)
    peer = dataclasses.replace(ours, policy="flink")

    def verdict(actions: int, behind: float) -> str:
        tuned = decisions_tuned.Tuned(
            "step-x2", "flink", {}, dataclasses.replace(peer, actions=actions, behind=behind), 1
        )
        return decisions_tuned.table({"step-x2": ours}, [tuned]).splitlines()[-1].rsplit("|", 2)[-2].strip()

    assert verdict(2 * ours.actions, ours.behind) == "yes"
    assert verdict(2 * ours.actions, ours.behind / 2).startswith("no")  # fewer changes, but more behind
    assert verdict(2 * ours.actions - 1, ours.behind).startswith("no")
