"""The autoscaler's loop: sample → windows → decide → control store → event log."""

from tidal.controller.events import EventLog
from tidal.controller.loop import Actuator, Controller, DecisionRecorder, Probe, VertexSample
from tidal.controller.policy import KpaPolicy, NumaflowPolicy, VertexPolicy, VertexView
from tidal.controller.probe import StoreProbe

__all__ = [
    "Actuator",
    "Controller",
    "DecisionRecorder",
    "EventLog",
    "KpaPolicy",
    "NumaflowPolicy",
    "Probe",
    "StoreProbe",
    "VertexPolicy",
    "VertexSample",
    "VertexView",
]
