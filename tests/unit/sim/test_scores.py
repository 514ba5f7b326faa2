"""The scores cannot be gamed: a policy that copies the oracle a minute late, with no catch-up,
must score badly on time behind (issue #18: it scored 0 % behind and 0.98× the oracle when
"behind" was judged per vertex)."""

from __future__ import annotations

import math

from tidal.scaling import Decision, Rule
from tidal.sim import make_trace, reference_pipeline, score, simulate
from tidal.sim.model import default_models
from tidal.sim.run import demand
from tidal.sim.scores import paths

SPEC = reference_pipeline()


class LateOracle:
    """Asks for what the load needed ``late`` seconds ago: exactly enough, a minute too late."""

    name = "late-oracle"

    def __init__(self, need: list[int], late: float) -> None:
        self.need, self.late = need, late

    def decide(self, view) -> Decision:
        i = max(0, min(len(self.need) - 1, int(view.now - self.late)))
        want = max(1, self.need[i])
        rule = Rule.SCALE_UP if want > view.replicas else Rule.STEADY
        return Decision(view.name, view.now, view.replicas, want, rule, "the oracle, late", recommended=want)

    def wake_for_path(self, view, woken):
        return None

    def most_delivered(self):
        return None


def test_a_late_copy_of_the_oracle_scores_behind_end_to_end() -> None:
    trace = make_trace("step-x2")
    models = default_models(SPEC)
    offered = demand(SPEC, trace.rates)
    policies = {
        name: LateOracle([math.ceil(r / models[name].capacity - 1e-9) for r in offered[name]], 60.0)
        for name in offered
    }
    late = score(simulate(SPEC, trace, "late-oracle", policies=policies))
    static = score(simulate(SPEC, trace, "static-peak"))
    assert late.behind > 0.3, late  # the minute's backlog is never caught up
    assert late.p99_delay > 30
    assert static.behind == 0.0


def test_paths_run_from_each_source_to_each_sink() -> None:
    assert paths(SPEC) == [["in", "work", "out"]]
