"""When a query's warm-up is over (tidal.spark.query.vertex.past_start): the controller waits for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tidal.spark.query.vertex import past_start


@dataclass
class Query:
    """What past_start reads of a StreamingQuery: isActive, lastProgress, status."""

    message: str
    lastProgress: dict[str, Any] | None = None  # noqa: N815 - Spark's name
    isActive: bool = True  # noqa: N815 - Spark's name
    status: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.status = {"message": self.message, "isDataAvailable": False, "isTriggerActive": True}


@pytest.mark.parametrize(
    "message",
    [
        "Initializing sources",
        "Initializing StreamExecution",
        "Writing offsets to log",
        "Processing new data",
        "",
    ],
)
def test_a_first_batch_still_running_is_not_past_start(message):
    # In a fresh JVM the first batch takes seconds: deciding then sees an idle pipeline.
    assert not past_start(Query(message))


def test_a_finished_batch_a_trigger_that_found_nothing_or_a_stopped_query_is_past_start():
    assert past_start(Query("Processing new data", lastProgress={"batchId": 0}))
    assert past_start(Query("Waiting for data to arrive"))
    assert past_start(Query("Stopped", isActive=False))
