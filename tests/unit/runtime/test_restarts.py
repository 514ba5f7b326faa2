"""Which query failures are retried from the checkpoint, and how often (tidal.spark.run.restarts)."""

from __future__ import annotations

from tidal.spark.run.restarts import OutageRestarts, RestartBudget, transient, unreachable


def test_only_the_machines_failures_are_transient():
    assert transient("Python worker failed to connect back.")
    assert transient(
        "org.apache.spark.SparkException: Timed out while waiting for the Python worker to connect back"
    )
    assert not transient("UdfError: vertex 'x' failed on message 'm1' after 3 attempt(s): ValueError: bad")


def test_three_restarts_per_vertex_in_ten_minutes_then_none():
    budget = RestartBudget()
    assert [budget.take("a", t) for t in (0.0, 1.0, 2.0)] == [1, 2, 3]
    assert budget.take("a", 3.0) is None  # spent: the run stops, naming the vertex
    assert budget.take("b", 3.0) == 1  # per vertex
    assert budget.take("a", 601.0) == 3  # the first one has left the window


def test_the_buffers_unreachable_is_an_outage_not_a_wrong_pipeline():
    assert unreachable("TimeoutError: nats: timeout")
    assert unreachable("NoServersError: nats: no servers available for connection")
    # A stream electing a leader for longer than the buffer's own retries (a server lost):
    assert unreachable("NoStreamResponseError: nats: no response from stream")
    assert unreachable("NoRespondersError: nats: no responders available for request")
    assert not unreachable("UdfError: vertex 'x' failed on message 'm1': ValueError: timeout")
    assert not transient("TimeoutError: nats: timeout")  # not spent from the budget of three


def test_an_outage_restarts_every_few_seconds_until_it_lasted_too_long():
    outages = OutageRestarts(limit=30.0, retry=5.0)
    assert not outages.in_outage("work")
    assert outages.decide("work", 100.0) == "restart"
    assert outages.decide("work", 102.0) == "wait"  # started 2 s ago: let it try
    assert outages.decide("work", 105.0) == "restart"
    assert outages.outage("work", 110.0) == 10.0
    assert outages.decide("work", 131.0) == "give-up"  # 31 s of failures in a row


def test_a_committed_batch_ends_the_outage_and_the_next_one_counts_from_zero():
    outages = OutageRestarts(limit=30.0, retry=5.0)
    outages.decide("work", 100.0)
    outages.recovered("work")
    assert not outages.in_outage("work")
    assert outages.decide("work", 200.0) == "restart" and outages.outage("work", 225.0) == 25.0
