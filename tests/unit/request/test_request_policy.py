"""The KPA on an HTTP source's measured load: it scales on concurrency the request path reports
and tells the path when the activator stands in it (spec/knative.md §1.7, §4.4)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tidal.controller.policy import PolicyInput
from tidal.controller.request_policy import RequestKpaPolicy
from tidal.scaling import PressureCheck, VertexKind
from tidal.scaling.kpa import KpaMetric, KpaSpec


@dataclass(frozen=True)
class Sample:
    at: float
    concurrency: float
    rps: float


@dataclass
class Load:
    samples: list[Sample] = field(default_factory=list)
    in_path: list[bool] = field(default_factory=list)

    def take_samples(self) -> list[Sample]:
        out, self.samples = self.samples, []
        return out

    def set_in_path(self, in_path: bool) -> None:
        self.in_path.append(in_path)


def view(now: float, replicas: int, ready: int) -> PolicyInput:
    return PolicyInput(
        name="in", kind=VertexKind.SOURCE, now=now, replicas=replicas, ready=ready, processed=0.0,
        pending_now=0.0, busy_seconds=None, rate=None, pending=None, last_scaled_at=0.0,
        pressure=PressureCheck.none(), started_at=0.0, buffer_max_length=30_000, buffer_usage_limit=0.8,
        read_batch_size=500,
    )  # fmt: skip


def run(tbc: float, concurrency: float, ready: int, seconds: int = 10) -> tuple[int, bool]:
    spec = KpaSpec(metric=KpaMetric.CONCURRENCY, container_concurrency=10, target_burst_capacity=tbc)
    load = Load()
    policy = RequestKpaPolicy(spec, "in", 0.0, load, ready=ready)
    decision = None
    for t in range(1, seconds + 1):
        load.samples.append(Sample(float(t), concurrency, concurrency * 100))
        decision = policy.decide(view(float(t), ready, ready))
    assert decision is not None
    return decision.desired, load.in_path[-1]


def test_it_scales_on_measured_concurrency_over_the_target():
    # CC 10 at 70 %: 7 concurrent requests a receiver; 30 in flight wants ceil(30 / 7) = 5.
    desired, _ = run(tbc=211, concurrency=30, ready=5)
    assert desired == 5


def test_a_request_at_zero_wakes_the_source():
    desired, in_path = run(tbc=211, concurrency=1, ready=0, seconds=1)
    assert desired == 1 and in_path  # held by the activator until a receiver is ready


def test_excess_burst_capacity_decides_whether_the_activator_stays_in_the_path():
    # 5 receivers × 10 = 50 capacity; 30 in flight: EBC = 50 − 211 − 30 < 0 → in the path.
    assert run(tbc=211, concurrency=30, ready=5)[1] is True
    # TBC 10: EBC = 50 − 10 − 30 = 10 ≥ 0 → out of the path.
    assert run(tbc=10, concurrency=30, ready=5)[1] is False
    # TBC 0: out as soon as receivers are ready; −1: always in.
    assert run(tbc=0, concurrency=30, ready=5)[1] is False
    assert run(tbc=-1, concurrency=1, ready=5)[1] is True
    # No receiver ready: always in, whatever TBC says.
    assert run(tbc=0, concurrency=1, ready=0, seconds=1)[1] is True


def test_the_path_is_re_pointed_only_when_the_multiscaler_informs_or_readiness_changes():
    """``updateLatestScale``: steady load and steady readiness inform once; a change of the EBC's
    sign informs again (TBC 211 with 5 ready of CC 10: 50 − 211 − load < 0, then more ready)."""
    spec = KpaSpec(metric=KpaMetric.CONCURRENCY, container_concurrency=10, target_burst_capacity=30)
    load = Load()
    policy = RequestKpaPolicy(spec, "in", 0.0, load, ready=2)
    decisions = []
    for t in range(1, 11):
        load.samples.append(Sample(float(t), 5.0, 500.0))
        decisions.append(policy.decide(view(float(t), 2, 2)))
    # 2 ready × 10 − 30 − 5 < 0: in the path, said once, then nothing new to act on.
    assert load.in_path == [True]
    assert decisions[0].inputs["informed"] is True and "informed" not in decisions[-1].inputs
    for t in range(11, 21):  # five ready: 50 − 30 − 5 ≥ 0, the EBC's sign flips
        load.samples.append(Sample(float(t), 5.0, 500.0))
        decisions.append(policy.decide(view(float(t), 5, 5)))
    assert load.in_path[-1] is False
    assert policy.status.excess_burst_capacity >= 0 and policy.reported_scale == decisions[-1].desired
    assert len(load.in_path) <= 3  # once at start, once on the readiness change, once on the flip
