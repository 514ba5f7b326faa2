"""The queue-proxy's breaker and the activator's load-balancing policies (spec/knative.md §4.3, §5)."""

from __future__ import annotations

import asyncio
import random

import pytest

from tidal.request.breaker import Breaker, Overloaded
from tidal.request.throttler import Throttler, Tracker, choose, policy_name


def test_breaker_refuses_past_queue_plus_concurrency_and_never_runs_more_than_its_tokens():
    async def scenario() -> tuple[int, int]:
        breaker = Breaker(queue_depth=10, max_concurrency=1)  # the queue-proxy's shape for CC 1
        running = peak = refused = 0
        gate = asyncio.Event()

        async def request() -> None:
            nonlocal running, peak, refused
            try:
                async with breaker.maybe():
                    running += 1
                    peak = max(peak, running)
                    await gate.wait()
                    running -= 1
            except Overloaded:
                refused += 1

        tasks = [asyncio.create_task(request()) for _ in range(15)]
        await asyncio.sleep(0.01)
        gate.set()
        await asyncio.gather(*tasks)
        return peak, refused

    peak, refused = asyncio.run(scenario())
    assert peak == 1 and refused == 4  # 11 admitted (10 queued + 1), 4 refused at once


def test_breaker_constructor_errors_name_the_value():
    with pytest.raises(ValueError, match="queue depth"):
        Breaker(0, 1)
    with pytest.raises(ValueError, match="outside"):
        Breaker(1, 2, initial_capacity=3)


def test_reserve_needs_a_free_token_at_once():
    breaker = Breaker(10, 2)
    assert breaker.reserve() and breaker.reserve() and not breaker.reserve()
    breaker.release()
    assert breaker.reserve()


def test_a_waiter_that_times_out_gives_its_slot_back():
    async def scenario() -> int:
        breaker = Breaker(1, 1)
        await breaker.acquire()
        with pytest.raises(TimeoutError):
            await breaker.acquire(timeout=0.01)
        return breaker.pending

    assert asyncio.run(scenario()) == 1


def test_policy_follows_container_concurrency():
    assert [policy_name(cc) for cc in (0, 1, 3, 4, 100)] == [
        "random-choice-2", "first-available", "first-available", "round-robin", "round-robin"
    ]  # fmt: skip


def test_first_available_takes_the_first_receiver_with_room_in_sorted_order():
    trackers = [Tracker(u, 1) for u in ("a", "b", "c")]
    picks = []
    for _ in range(3):
        t, _ = choose(trackers, 1, 0, random.Random(0))
        assert t is not None
        picks.append(t.url)
    assert picks == ["a", "b", "c"]
    assert choose(trackers, 1, 0, random.Random(0))[0] is None  # all full


def test_round_robin_vector_from_knative():
    # Receivers of capacity 2 under round robin: 0, 1, then (the list shrinks to one) 0, then
    # back to three: 1, 2, 2.
    rng = random.Random(0)
    three = [Tracker(u, 2) for u in ("a", "b", "c")]
    picks, last = [], 0
    for _ in range(2):
        t, last = choose(three, 4, last, rng)
        picks.append(three.index(t))
    one = three[:1]
    t, last = choose(one, 4, last, rng)
    picks.append(one.index(t))
    for _ in range(3):
        t, last = choose(three, 4, last, rng)
        picks.append(three.index(t))
    # Knative's vector: a is full after its second pick, so the last one skips to c.
    assert picks == [0, 1, 0, 1, 2, 2]


def test_power_of_two_choices_prefers_the_less_loaded():
    trackers = [Tracker(u, 0) for u in ("a", "b")]
    trackers[0].in_flight = 5
    for seed in range(10):
        t, _ = choose(trackers, 0, 0, random.Random(seed))
        assert t is trackers[1]


def test_throttler_holds_until_a_receiver_arrives_and_bounds_what_it_holds():
    async def scenario() -> tuple[str, int]:
        throttler = Throttler(cc=1, max_held=2)

        async def one() -> str:
            async with throttler.slot(timeout=5) as tracker:
                return tracker.url

        first = asyncio.create_task(one())
        second = asyncio.create_task(one())
        await asyncio.sleep(0.01)
        refused = 0
        try:
            await one()
        except Overloaded:
            refused = 1
        throttler.update(["http://r1/"])
        urls = await asyncio.gather(first, second)
        return urls[0], refused

    url, refused = asyncio.run(scenario())
    assert url == "http://r1/" and refused == 1


def test_throttler_times_out_with_no_receiver():
    async def scenario() -> None:
        throttler = Throttler(cc=0, max_held=10)
        async with throttler.slot(timeout=0.05):
            pass

    with pytest.raises(TimeoutError):
        asyncio.run(scenario())
