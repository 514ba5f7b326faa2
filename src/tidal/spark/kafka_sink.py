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
import os
from collections.abc import Sequence
from typing import Any

from tidal.spec.model import KafkaSinkSpec

__all__ = ["KafkaSink"]

_PRODUCERS: dict[tuple[int, str, str], Any] = {}


class KafkaSink:
    def __init__(self, spec: KafkaSinkSpec, vertex: str) -> None:
        self.spec = spec
        self.vertex = vertex

    def _producer(self) -> Any:
        from confluent_kafka import Producer

        from tidal.spark.kafka import _expand

        key = (os.getpid(), json.dumps(self.spec.model_dump(), sort_keys=True, default=str), self.spec.topic)
        found = _PRODUCERS.get(key)
        if found is None:
            where = f"vertices[{self.vertex}].sink.kafka.producer"
            conf = {k: _expand(v, f"{where}.{k}") for k, v in self.spec.producer.items()}
            conf.update({"bootstrap.servers": self.spec.bootstrap_servers, "enable.idempotence": True})
            found = _PRODUCERS[key] = Producer(conf)
        return found

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
        for i, (message_id, payload) in enumerate(zip(ids, payloads, strict=True)):
            headers = [("tidal-id", message_id.encode())]
            if errors:
                headers.append(("tidal-error", errors[i].encode()))
            while True:
                try:
                    producer.produce(self.spec.topic, value=payload, key=self._key(message_id, payload),
                                     headers=headers, on_delivery=delivered)  # fmt: skip
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
        left = producer.flush(60)
        if left or failed:
            raise KafkaException(
                f"topic {self.spec.topic}: {len(failed)} deliveries failed ({failed[:1]}), "
                f"{left} unacknowledged"
            )

    def commit(self, batch_id: int, parts: Sequence[Any]) -> None:
        return None
