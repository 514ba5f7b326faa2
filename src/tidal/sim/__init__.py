"""The simulator: replay traffic through Tidal's own controller and scaling code.

A simulated pipeline (:mod:`tidal.sim.model`) stands in for Spark: replicas with a capacity
and a start-up delay, bounded buffers with back pressure, a virtual clock. The real
:class:`~tidal.controller.Controller` ticks it with the policy under test, so a policy change is
measured in seconds against the peers users would otherwise pick (:mod:`tidal.sim.peers`) on
seeded traces (:mod:`tidal.sim.traces`), and scored (:mod:`tidal.sim.scores`).
"""

from tidal.sim.model import DEFAULT_BATCH_SECONDS, SimPipeline, VertexModel, chained, default_models
from tidal.sim.run import POLICIES, TUNABLE, SimResult, make_policies, oracle, reference_pipeline, simulate
from tidal.sim.scores import Scores, score
from tidal.sim.traces import TRACES, Trace, make_trace

__all__ = [
    "DEFAULT_BATCH_SECONDS",
    "POLICIES",
    "TRACES",
    "TUNABLE",
    "Scores",
    "SimPipeline",
    "SimResult",
    "Trace",
    "VertexModel",
    "chained",
    "default_models",
    "make_policies",
    "make_trace",
    "oracle",
    "reference_pipeline",
    "score",
    "simulate",
]
