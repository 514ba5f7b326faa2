"""Which query failures are retried from the checkpoint, and how often (tidal.spark.run.restarts)."""

from __future__ import annotations

from tidal.spark.run.restarts import RestartBudget, transient


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
