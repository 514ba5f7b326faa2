"""The autoscaler's loop: sample → windows → decide → control store → event log."""

from tidal.controller.events import EventLog
from tidal.controller.loop import Actuator, Controller, DecisionRecorder, Probe, ProbeSample
from tidal.controller.policy import KpaPolicy, NumaflowPolicy, PolicyInput, VertexPolicy
from tidal.controller.probe import StoreProbe

__all__ = [
    "Actuator",
    "Controller",
    "DecisionRecorder",
    "EventLog",
    "KpaPolicy",
    "NumaflowPolicy",
    "PolicyInput",
    "Probe",
    "ProbeSample",
    "StoreProbe",
    "VertexPolicy",
]
