"""Real Kafka clients for dashboard tests: a keyed producer and in-process group members."""

from __future__ import annotations

import threading

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from backend.kafka.settings import KafkaSettings


def create_topic(settings: KafkaSettings, name: str, partitions: int) -> None:
    admin = AdminClient(settings.client_config())
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce_keys(settings: KafkaSettings, topic: str, keys: list[str], per_key: int = 3) -> None:
    """Keyed records with the Java (murmur2) partitioner, as the fleet simulator uses."""
    producer = Producer(settings.client_config(partitioner="murmur2_random"))
    for i in range(per_key):
        for key in keys:
            producer.produce(topic, key=key, value=f'{{"seq": {i}}}'.encode())
    assert producer.flush(30) == 0


class Member:
    """A real consumer-group member polling on its own thread until close()."""

    def __init__(self, settings: KafkaSettings, group: str, topic: str, client_id: str) -> None:
        self.client_id = client_id
        self.closed = False
        self.consumer = Consumer(settings.client_config(**{
            "group.id": group, "client.id": client_id, "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range", "auto.commit.interval.ms": 200,
        }))
        self.consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.2)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()
