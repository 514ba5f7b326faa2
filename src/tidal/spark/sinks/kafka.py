"""The Kafka sink: an idempotent producer, **at least once**.

Each task produces its messages (``enable.idempotence``: no duplicates from the producer's own
retries) and waits until the broker acknowledged every one before the task succeeds; a failed
delivery fails the task, and Spark runs it again. A micro-batch replayed after a crash is
produced again, so a consumer can see a message twice: every record carries the Tidal message
id in the ``tidal-id`` header for consumers that de-duplicate. The key is a JSON payload field
(``keyField``) or, without one, the message id. ``producer`` passes librdkafka keys through
(``${NAME}`` values from the environment).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tidal.spark.batch.clients import expand_env
from tidal.spark.sinks.connector import Sink, SinkPlace
from tidal.spec.model import KafkaSinkSpec, SinkSpec

__all__ = ["KafkaSink", "build"]


class KafkaSink:
    def __init__(self, spec: KafkaSinkSpec, vertex: str) -> None:
        self.spec = spec
        self.vertex = vertex

    def _producer(self) -> Any:
        """A producer for one task, closed when it is done. Not cached in the Python worker:
        workers outlive a run, and a cached producer whose broker went away retries its
        connection for as long as the worker lives, writing librdkafka's errors to stderr
        (seen in the full suite, long after the Kafka tests). Creating one costs milliseconds
        against a task's batch of messages."""
        from confluent_kafka import Producer

        where = f"vertices[{self.vertex}].sink.kafka.producer"
        conf = {k: expand_env(v, f"{where}.{k}") for k, v in self.spec.producer.items()}
        conf.update({"bootstrap.servers": self.spec.bootstrap_servers, "enable.idempotence": True})
        return Producer(conf)

    def _key(self, message_id: str, payload: bytes) -> str:
        if self.spec.key_field is None:
            return message_id
        try:
            value = json.loads(payload).get(self.spec.key_field)
        except (ValueError, AttributeError):
            value = None
        return message_id if value is None else str(value)

    def write(self, ids: Any, payloads: Any, errors: Sequence[str] = ()) -> None:
        from confluent_kafka import KafkaException

        ids = ids.to_pylist() if hasattr(ids, "to_pylist") else list(ids)
        payloads = payloads.to_pylist() if hasattr(payloads, "to_pylist") else list(payloads)
        failed: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failed.append(str(err))

        producer = self._producer()
        try:
            left = self._produce(producer, ids, payloads, errors, delivered)
        finally:
            producer.close()
        if left or failed:
            raise KafkaException(
                f"topic {self.spec.topic}: {len(failed)} deliveries failed ({failed[:1]}), "
                f"{left} unacknowledged"
            )

    def _produce(self, producer: Any, ids: list[str], payloads: list[bytes], errors: Sequence[str],
                 delivered: Any) -> int:  # fmt: skip
        """Produce every message and wait for the broker's acknowledgements; the count left unacknowledged."""
        for i, (message_id, payload) in enumerate(zip(ids, payloads, strict=True)):
            headers = [("tidal-id", message_id.encode())]
            if errors:
                headers.append(("tidal-error", errors[i].encode()))
            produce(producer, self.spec.topic, value=payload, key=self._key(message_id, payload),
                    headers=headers, on_delivery=delivered)  # fmt: skip
        return int(producer.flush(60))

    def commit(self, batch_id: int, parts: Sequence[Any]) -> None:
        return None


def produce(producer: Any, topic: str, **message: Any) -> None:
    """``producer.produce``, waiting while librdkafka's local queue is full (``BufferError``):
    a broker that acknowledges slower than the loop produces fills it, most of all on a busy box."""
    while True:
        try:
            producer.produce(topic, **message)
            return
        except BufferError:  # let deliveries drain it
            producer.poll(0.1)


def build(spec: SinkSpec, place: SinkPlace) -> Sink:
    assert spec.kafka is not None
    return KafkaSink(spec.kafka, place.vertex)
