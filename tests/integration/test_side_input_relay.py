"""The side-input relay on both buffer backends: what the driver publishes, a reduce's task
fetches, on a real SQLite file and a real nats-server (JetStream, the backend of a cluster, whose
executors reach nothing of the driver's disk)."""

from __future__ import annotations

import pytest

from tidal.isb.open import open_store
from tidal.scaling.side_inputs import SideInputValue
from tidal.spark.batch import side_input_relay
from tidal.spark.batch.config import QueryConfig
from tidal.spark.batch.side_inputs import host_key

pytestmark = pytest.mark.nats


@pytest.mark.parametrize("backend", ["sqlite", "jetstream"])
def test_a_task_fetches_the_newest_values_the_driver_relayed(backend, tmp_path, nats_server):
    db = str(tmp_path / "pipeline.db")
    url = nats_server.url if backend == "jetstream" else None
    pipeline = f"relay-{backend}"
    driver = open_store(backend, db=db, pipeline=pipeline, url=url)
    config = QueryConfig(pipeline, "count", db, str(tmp_path), "count", backend=backend, url=url,
                         side_inputs=("a", "b"))  # fmt: skip
    try:
        assert side_input_relay.fetch(config) is None  # no relay yet: the vertex waits
        relay = side_input_relay.SideInputRelay(driver)
        relay.publish({"a": SideInputValue(1, 1.0, b"a1")})
        assert side_input_relay.fetch(config) is None  # b has no value yet
        relay.publish({"a": SideInputValue(1, 1.0, b"a1"), "b": SideInputValue(1, 2.0, b"b1")})
        relay.publish({"a": SideInputValue(2, 3.0, b"a2"), "b": SideInputValue(1, 2.0, b"b1")})
        relay.publish({"a": SideInputValue(2, 3.0, b"a2"), "b": SideInputValue(1, 2.0, b"b1")})  # again
        side = side_input_relay.fetch(config)
        assert side is not None and side.key == host_key(str(tmp_path))
        assert side.values == (("a", 2, b"a2"), ("b", 1, b"b1"))
        buffer = driver.open(side_input_relay.RELAY_BUFFER)
        assert buffer.pending() == 2  # the newest snapshot alone: older ones trimmed
    finally:
        if backend == "jetstream":
            driver.drop(side_input_relay.RELAY_BUFFER)
        driver.close()
