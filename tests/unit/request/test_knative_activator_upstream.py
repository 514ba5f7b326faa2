"""Knative's own table-driven tests, ported (knative/serving @98e5ef9):

* ``pkg/queue/breaker_test.go`` → :mod:`tidal.request.breaker`
* ``pkg/activator/net/lb_policy_test.go`` → :func:`tidal.request.throttler.choose`
* ``pkg/activator/net/throttler_test.go`` (``TestInferIndex``, ``TestPickIndices``,
  ``TestAssignSlice``, ``TestThrottlerUpdateCapacity``, ``TestThrottlerCalculateCapacity``) →
  :mod:`tidal.request.subsetting` and :meth:`Throttler.set_activators`

Each case keeps upstream's label; ``docs/conformance.md`` lists the cases not ported and why.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from tidal.request import subsetting
from tidal.request.breaker import Breaker, Overloaded, Unpaired
from tidal.request.throttler import Throttler, Tracker, choose

# -- breaker_test.go -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("queue_depth", "max_concurrency", "initial"),
    [
        pytest.param(0, 1, 1, id="QueueDepth = 0"),
        pytest.param(1, -1, 1, id="MaxConcurrency negative"),
        pytest.param(1, 1, -1, id="InitialCapacity negative"),
        pytest.param(1, 5, 6, id="InitialCapacity out-of-bounds"),
    ],
)
def test_breaker_invalid_constructor(queue_depth, max_concurrency, initial):
    with pytest.raises(ValueError):
        Breaker(queue_depth, max_concurrency, initial_capacity=initial)


def test_breaker_reserve_overload():
    b = Breaker(1, 1, 1)  # capacity 2
    assert b.reserve()
    assert not b.reserve()
    b.release()
    assert b.reserve()
    b.release()


class Requestor:
    """Upstream's ``requestor``: requests that block inside the breaker until processed."""

    def __init__(self, breaker: Breaker) -> None:
        self.breaker = breaker
        self.gates: list[asyncio.Event] = []
        self.results: asyncio.Queue[bool] = asyncio.Queue()

    def request(self, timeout: float | None = None) -> None:
        gate = asyncio.Event()
        self.gates.append(gate)

        async def run() -> None:
            try:
                async with self.breaker.maybe(timeout):
                    await gate.wait()
            except (Overloaded, TimeoutError):
                self.gates.remove(gate)
                await self.results.put(False)
            else:
                await self.results.put(True)

        asyncio.get_running_loop().create_task(run())

    async def expect_failure(self) -> None:
        assert await asyncio.wait_for(self.results.get(), 5) is False

    async def process_successfully(self) -> None:
        await asyncio.sleep(0)
        self.gates.pop(0).set()
        assert await asyncio.wait_for(self.results.get(), 5) is True


def _run(story):
    asyncio.run(story())


def test_breaker_overload_mixed():
    async def story() -> None:
        b = Breaker(1, 1, 1)
        reqs = Requestor(b)
        reqs.request()
        while b.in_flight != 1:
            await asyncio.sleep(0.001)
        assert not b.reserve()
        await reqs.process_successfully()
        assert b.reserve()
        b.release()

    _run(story)


def test_breaker_overload():
    async def story() -> None:
        reqs = Requestor(Breaker(1, 1, 1))
        reqs.request()
        reqs.request()
        reqs.request()  # overshoot by one
        await reqs.expect_failure()
        await reqs.process_successfully()
        await reqs.process_successfully()

    _run(story)


def test_breaker_queueing():
    async def story() -> None:
        b = Breaker(1, 1, 0)
        reqs = Requestor(b)
        reqs.request()
        reqs.request()  # the queue holds both
        await asyncio.sleep(0.01)
        b.update_concurrency(1)
        await reqs.process_successfully()
        await reqs.process_successfully()

    _run(story)


def test_breaker_no_overload():
    async def story() -> None:
        reqs = Requestor(Breaker(1, 1, 1))
        reqs.request()
        reqs.request()
        await reqs.process_successfully()
        reqs.request()
        await reqs.process_successfully()
        reqs.request()
        await reqs.process_successfully()
        await reqs.process_successfully()

    _run(story)


def test_breaker_cancel():
    """Upstream cancels contexts; here a request's deadline passes while it waits for a token."""

    async def story() -> None:
        b = Breaker(1, 1, 0)
        reqs = Requestor(b)
        reqs.request(timeout=0.01)
        await reqs.expect_failure()
        reqs.request(timeout=0.01)  # the freed slot is really free
        await reqs.expect_failure()
        b.update_concurrency(1)
        reqs.request()
        await asyncio.sleep(0.01)
        reqs.request()
        reqs.request()
        await reqs.expect_failure()  # consistently at capacity
        reqs.request(timeout=0.01)
        await reqs.expect_failure()
        await reqs.process_successfully()
        await reqs.process_successfully()

    _run(story)


def test_breaker_update_concurrency():
    b = Breaker(1, 1, 0)
    b.update_concurrency(1)
    assert b.capacity == 1
    b.update_concurrency(0)
    assert b.capacity == 0


def test_semaphore_acquire_non_blocking_has_no_capacity():
    assert not Breaker(1, 1, 0).reserve()


def test_semaphore_release():
    """A paired release is fine; an unpaired one is refused (upstream panics) and changes nothing."""
    b = Breaker(1, 1, 1)
    assert b.reserve()
    b.release()
    with pytest.raises(Unpaired, match="without a matching"):
        b.release()
    assert (b.pending, b.in_flight) == (0, 0)
    assert b.reserve() and not b.reserve()  # still admits exactly its capacity


def test_semaphore_update_capacity():
    b = Breaker(1, 3, 1)
    assert b.capacity == 1
    assert b.reserve()
    b.update_concurrency(3)
    assert b.capacity == 3


# -- lb_policy_test.go: TestRoundRobin -----------------------------------------------------------


def _trackers(n: int, cc: int) -> list[Tracker]:
    return [Tracker(str(i), cc) for i in range(n)]


def test_round_robin_with_cc_1():
    rng = random.Random(0)
    pt = _trackers(3, 1)
    t, idx = choose(pt, 4, 0, rng)
    assert t is pt[0]
    t, idx = choose(pt, 4, idx, rng)
    assert t is pt[1]
    # A shorter list: jump over and start from 0, which is occupied: nothing, and the reset stays.
    t, idx = choose(pt[:1], 4, idx, rng)
    assert t is None and idx == 0
    t, idx = choose(pt, 4, idx, rng)
    assert t is pt[2]
    t, idx = choose(pt, 4, idx, rng)
    assert t is None
    pt[2].release()  # reset the last one
    t, idx = choose(pt, 4, idx, rng)
    assert t is pt[2]


def test_round_robin_with_cc_2():
    rng = random.Random(0)
    pt = _trackers(3, 2)
    picks = []
    idx = 0
    for targets in (pt, pt, pt[:1], pt, pt, pt):
        t, idx = choose(targets, 4, idx, rng)
        picks.append(pt.index(t))
    assert picks == [0, 1, 0, 1, 2, 2]


def test_random_choice_2_with_two_trackers_compares_both():
    pt = _trackers(2, 0)
    pt[1].in_flight = 3
    for seed in range(20):
        assert choose(pt, 0, 0, random.Random(seed))[0] is pt[0]


def test_first_available():
    pt = _trackers(2, 1)
    assert choose(pt, 1, 0, random.Random(0))[0] is pt[0]
    assert choose(pt, 1, 0, random.Random(0))[0] is pt[1]
    assert choose(pt, 1, 0, random.Random(0))[0] is None


# -- throttler_test.go: subsetting ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("ips", "want"),
    [
        pytest.param([], -1, id="empty"),
        pytest.param(["11.11.11.11", "11.11.11.12"], -1, id="missing"),
        pytest.param(["10.10.10.3", "11.11.11.11"], 0, id="first"),
        pytest.param(["10.10.10.1", "10.10.10.2", "10.10.10.3", "11.11.11.11"], 2, id="middle"),
        pytest.param(["10.10.10.1", "10.10.10.2", "10.10.10.3"], 2, id="last"),
    ],
)
def test_infer_index(ips, want):
    assert subsetting.infer_index(ips, "10.10.10.3") == want


@pytest.mark.parametrize(
    ("pods", "acts", "idx", "want"),
    [
        pytest.param(1, 1, 0, (0, 1, 0), id="1 pod, 1 activator"),
        pytest.param(1, 2, 0, (0, 1, 0), id="1 pod, 2 activators, this is 0"),
        pytest.param(1, 2, 1, (0, 1, 0), id="1 pod, 2 activators, this is 1"),
        pytest.param(2, 3, 1, (1, 2, 0), id="2 pods, 3 activators, this is 1"),
        pytest.param(2, 3, 2, (0, 1, 0), id="2 pods, 3 activators, this is 2"),
        pytest.param(3, 3, 2, (2, 3, 0), id="3 pods, 3 activators, this is 2"),
        pytest.param(10, 3, 0, (0, 3, 1), id="10 pods, 3 activators this is 0"),
        pytest.param(10, 3, 1, (3, 6, 1), id="10 pods, 3 activators this is 1"),
        pytest.param(10, 3, 2, (6, 9, 1), id="10 pods, 3 activators this is 2"),
        pytest.param(150, 5, 0, (0, 30, 0), id="150 pods, 5 activators this is 0"),
        pytest.param(150, 5, 1, (30, 60, 0), id="150 pods, 5 activators this is 1"),
        pytest.param(150, 5, 4, (120, 150, 0), id="150 pods, 5 activators this is 4"),
    ],
)
def test_pick_indices(pods, acts, idx, want):
    assert subsetting.pick_indices(pods, idx, acts) == want


@pytest.mark.parametrize(
    ("trackers", "idx", "acts", "want"),
    [
        pytest.param([], 0, 1, [], id="notrackers"),
        pytest.param(["1", "2", "3"], 1, 1, ["1", "2", "3"], id="idx=1, na=1"),
        pytest.param(["1", "2", "3"], -1, 1, ["1", "2", "3"], id="idx=-1"),
        pytest.param(["1", "2", "3"], 1, 3, ["2"], id="idx=1 na=3"),
        pytest.param(["1"], 1, 3, ["1"], id="len=1"),
        pytest.param(["1", "2", "3"], 1, 2, ["2"], id="idx=1, breaker"),
    ],
)
def test_assign_slice(trackers, idx, acts, want):
    assert subsetting.assign_slice(trackers, idx, acts) == want


@pytest.mark.parametrize(
    ("backends", "activators", "index", "cc", "pods", "want"),
    [
        # Upstream's cluster-IP cases (no pod trackers): capacity split among the activators.
        pytest.param(1, 0, 0, 10, 0, 10, id="capacity: 1, cc: 10"),
        pytest.param(10, 0, 0, 10, 0, 100, id="capacity: 10, cc: 10"),
        pytest.param(100, 0, 0, 10, 0, 1000, id="capacity: 100, cc: 10"),
        pytest.param(10, 5, 0, 10, 0, 20, id="numActivators: 5, capacity: 10, cc: 10"),
        pytest.param(10, 200, 0, 10, 0, 1, id="numActivators: 200, capacity: 10, cc: 10"),
        pytest.param(0, 200, 0, 10, 0, 0, id="numActivators: 200, capacity: 0, cc: 10"),
        # Pod trackers (how Tidal always routes): capacity is the assigned slice's.
        pytest.param(0, 1, 0, 10, 1, 10, id="numActivators: 1, capacity: 0, cc: 10, pods: 1"),
        pytest.param(-1, 1, 0, 10, 2, 20, id="2 backends. numActivators: 1, capacity: -1, cc: 10, pods: 2"),
        pytest.param(-1, 2, 0, 10, 2, 10, id="2 activators. numActivators: 2, cc: 10, pods: 2"),
        pytest.param(-1, 2, 0, 10, 3, 20, id="numActivators: 2, index: 0, pods: 3"),
        pytest.param(-1, 2, 1, 10, 3, 10, id="numActivators: 2, index: 1, pods: 3"),
        pytest.param(5, 2, 0, 1, 5, 3, id="numActivators: 2, index: 0, pods: 5, cc: 1"),
        pytest.param(5, 2, 1, 1, 5, 2, id="numActivators: 2, index: 1, pods: 5, cc: 1"),
    ],
)
def test_throttler_update_capacity(backends, activators, index, cc, pods, want):
    names = [str(i) for i in range(pods)]
    assigned = subsetting.assign_slice(names, index, max(activators, 1)) if cc > 0 else names
    assert subsetting.calculate_capacity(cc, len(assigned), backends, activators) == want


@pytest.mark.parametrize(
    ("pods", "index", "want"),
    [pytest.param(0, 0, 0, id="newInfiniteBreaker, capacity: 0, cc: 0"),
     pytest.param(3, 1, subsetting.MAX_CAPACITY, id="Infinite capacity with podIP trackers.")],
)  # fmt: skip
def test_throttler_update_capacity_infinite(pods, index, want):
    """CC 0: upstream's infinite breaker is open (1) or shut (0); Tidal's holds 2^31 - 1 tokens
    when open. Every activator keeps every receiver (``checkAssignedPod``)."""

    async def story() -> tuple[int, int]:
        t = Throttler(cc=0, max_held=10)
        t.update([f"http://r{i}/" for i in range(pods)])
        t.set_activators(2, index)
        return t.capacity, len(t.assigned)

    capacity, assigned = asyncio.run(story())
    assert capacity == want and assigned == pods


def test_throttler_calculate_capacity_over_the_maximum():
    assert subsetting.calculate_capacity(0, subsetting.MAX_CAPACITY + 5, 1, 1) == subsetting.MAX_CAPACITY


def test_throttler_with_two_activators_balances_over_its_own_slice_only():
    """Two activators, three receivers of CC 1: index 0 owns r0 and the remnant r2, index 1 owns
    r1; each admits exactly its slice's capacity and never picks the other's receivers."""

    async def story(index: int) -> tuple[int, set[str]]:
        t = Throttler(cc=1, max_held=10)
        t.update(["http://r0/", "http://r1/", "http://r2/"])
        t.set_activators(2, index)
        used: set[str] = set()
        for _ in range(t.capacity):
            tracker, t._index = choose(t.assigned, t.cc, t._index, t._rng)
            assert tracker is not None
            used.add(tracker.url)
        return t.capacity, used

    assert asyncio.run(story(0)) == (2, {"http://r0/", "http://r2/"})
    assert asyncio.run(story(1)) == (1, {"http://r1/"})


def test_set_activators_refuses_an_index_outside_the_count():
    with pytest.raises(ValueError, match="outside"):
        Throttler(cc=1, max_held=1).set_activators(2, 2)


@pytest.mark.parametrize(
    ("backends", "activators", "open_"),
    [
        pytest.param(0, 0, False, id="newInfiniteBreaker, numActivators: 0, capacity: 0, cc: 0"),
        pytest.param(1, 0, True, id="newInfiniteBreaker, numActivators: 0, capacity: 1, cc: 0"),
        pytest.param(10, 0, True, id="newInfiniteBreaker, numActivators: 0, capacity: 10, cc: 0"),
        pytest.param(0, 200, False, id="newInfiniteBreaker, numActivators: 200, capacity: 0, cc: 0"),
        pytest.param(1, 200, True, id="newInfiniteBreaker, numActivators: 200, capacity: 1, cc: 0"),
    ],
)
def test_throttler_update_capacity_infinite_breaker(backends, activators, open_):
    """Upstream's infinite breaker reports 1 (open) or 0 (shut); Tidal's is open with
    ``MAX_CAPACITY`` tokens."""
    capacity = subsetting.calculate_capacity(0, 0, backends, activators)
    assert capacity == (subsetting.MAX_CAPACITY if open_ else 0)
