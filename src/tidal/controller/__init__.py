"""The autoscaler's loop: sample → windows → decide → control store → event log."""

from tidal.controller.events import EventLog
from tidal.controller.loop import Actuator, Controller, Probe, VertexSample
from tidal.controller.probe import StoreProbe

__all__ = ["Actuator", "Controller", "EventLog", "Probe", "StoreProbe", "VertexSample"]
