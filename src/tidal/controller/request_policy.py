"""Knative's KPA driving an HTTP source's receivers on their measured concurrency or RPS.

A stream vertex's KPA (:class:`~tidal.controller.policy.KpaPolicy`) sees arrivals per second
from the buffers. An HTTP source has what Knative has: every second the request path reports
the revision-wide average concurrency and requests/s (receivers' queue-proxies minus their
proxied part, plus the activator's, which counts held requests), and the activator's poke adds
its immediate one-request sample. :class:`RequestKpaPolicy` records each report in the KPA's
stable and panic windows and decides with Knative's rules (:class:`~tidal.scaling.kpa.KpaScaler`).

After a decision it tells the request path whether the activator stays in the path: Proxy
while no replica is wanted or the excess burst capacity is negative (``targetBurstCapacity``: 0
never in the path once receivers are ready, −1 always), Serve otherwise (``spec/knative.md`` §4.4).
It does so when Knative's reconciler would act: when the multiscaler informs it (the decider's
desired scale changed, or its EBC changed sign: :mod:`tidal.scaling.kpa_notify`) or the ready
receivers changed (the reconciler's endpoint watch); each decision says whether it informed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tidal.controller.policy import PolicyInput, VertexPolicy
from tidal.scaling.decision import Decision
from tidal.scaling.kpa import KpaMetric, KpaScaler, KpaSpec, initial_excess_burst_capacity
from tidal.scaling.kpa_notify import DeciderStatus, reported_desired_scale, update_latest_scale

__all__ = ["RequestKpaPolicy", "RequestLoad", "RequestSampleLike"]


class RequestSampleLike(Protocol):
    @property
    def at(self) -> float: ...
    @property
    def concurrency(self) -> float: ...
    @property
    def rps(self) -> float: ...


class RequestLoad(Protocol):
    """What the request path offers the policy (:class:`tidal.request.path.RequestPath`)."""

    def take_samples(self) -> Sequence[RequestSampleLike]: ...

    def set_in_path(self, in_path: bool) -> None: ...


class RequestKpaPolicy(VertexPolicy):
    name = "kpa"

    def __init__(self, spec: KpaSpec, vertex: str, now: float, load: RequestLoad, ready: int = 0) -> None:
        self.scaler = KpaScaler(vertex, spec, now, ready)
        self._load = load
        self._metric = spec.metric
        # The decider's status as the multiscaler keeps it: EBC starts at its initial value.
        self.status = DeciderStatus(excess_burst_capacity=int(initial_excess_burst_capacity(spec)))
        self.reported_scale: int | None = None  # the PodAutoscaler's status.desiredScale
        self._ready_seen: int | None = None
        self.informs = 0  # ticks that informed the reconciler

    def decide(self, view: PolicyInput) -> Decision:
        for sample in self._load.take_samples():
            value = sample.concurrency if self._metric == KpaMetric.CONCURRENCY else sample.rps
            self.scaler.record(sample.at, value)
        decision = self.scaler.decide(view.now, view.ready, view.replicas)
        last = self.scaler.decider.last
        informed = False
        if last is not None and last.valid:  # tickScaler: an invalid result informs nobody
            self.status, informed = update_latest_scale(
                self.status, last.decision.desired, last.excess_burst_capacity
            )
        if not (informed or view.ready != self._ready_seen):
            return decision  # the reconciler has nothing to act on: the path stays as it is
        self.informs += informed
        self._ready_seen = view.ready
        # computeStatus: the PodAutoscaler reports the scale the reconciler applies (bounds and the
        # scale-to-zero gate included), keeping a known one over an unknown one.
        self.reported_scale = reported_desired_scale(self.reported_scale, decision.desired)
        tbc = self.scaler.spec.target_burst_capacity
        if tbc == -1:
            in_path = True
        elif view.ready == 0:
            in_path = True  # nothing to serve from: hold
        elif tbc == 0:
            in_path = False
        else:
            in_path = last.activator_in_path if last is not None else True
        self._load.set_in_path(in_path)
        status, before, reported = self.status, decision, self.reported_scale
        return decision.replace(
            inputs=lambda: {
                **before.inputs,
                "informed": informed,
                "deciderDesiredScale": status.desired_scale,
                "deciderExcessBurstCapacity": status.excess_burst_capacity,
                "activatorInPath": in_path,
                "desiredScale": reported,
            }
        )
