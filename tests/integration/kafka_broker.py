"""A Kafka-protocol broker for the tests: librdkafka's mock cluster (in ``confluent-kafka``).

No Kafka broker installs from the package registries this project can reach (Apache Kafka is a
JVM tarball from its own site; the one wheel that bundles a broker, Tansu, was measured with
wrong end offsets for batched produces). librdkafka's mock cluster is created inside a client
(``test.mock.num.brokers``), listens on 127.0.0.1 and speaks the real protocol — metadata,
produce, fetch, watermarks, group offset commits — to any client in any process, which is what
the Spark tasks need. It does not support CreateTopics: a topic is created by the first produce
(with the mock's default of 4 partitions). It lives as long as the holder object.
"""

from __future__ import annotations

from typing import Any

from tidal.spark.sinks.kafka import produce


class MockKafka:
    def __init__(self) -> None:
        from confluent_kafka import Producer

        self._holder = Producer({"test.mock.num.brokers": 1, "log_level": 3})
        brokers = self._holder.list_topics(timeout=10).brokers
        self.bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers.values())
        self.producer = Producer(
            {"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "log_level": 2}
        )

    def produce(
        self, topic: str, values: list[bytes], partitions: int = 4, keys: list[str] | None = None
    ) -> None:
        for i, value in enumerate(values):
            key = None if keys is None else keys[i]
            produce(self.producer, topic, value=value, partition=i % partitions, key=key)
            if i % 10_000 == 0:
                self.producer.poll(0)
        assert self.producer.flush(60) == 0

    def stop(self) -> None:
        """The broker goes away (the mock cluster lives in its holder client)."""
        self.producer.flush(5)
        del self.producer
        del self._holder
        import gc

        gc.collect()

    def consumer(self, group: str = "reader") -> Any:
        from confluent_kafka import Consumer

        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False})

    def ends(self, topic: str) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        c = self.consumer()
        meta = c.list_topics(topic, timeout=10).topics[topic]
        out = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions}
        c.close()
        return out

    def committed(self, topic: str, group: str) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        c = self.consumer(group)
        meta = c.list_topics(topic, timeout=10).topics[topic]
        found = c.committed([TopicPartition(topic, p) for p in meta.partitions], timeout=10)
        c.close()
        return {tp.partition: tp.offset for tp in found}
