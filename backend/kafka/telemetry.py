"""A group's telemetry: JSON events (Event contract) to its events topic, key = the sender.

Replicas send their lifecycle and heartbeats; the supervisor sends what it does to the whole
group (an offsets reset), so the event feed tells both in one stream."""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from confluent_kafka import Producer

from backend.contracts import Event, events_topic
from backend.kafka.settings import KafkaSettings

log = logging.getLogger("groupscope.telemetry")


class Telemetry:
    """Fire-and-forget event producer; never blocks the consumer loop."""

    def __init__(self, settings: KafkaSettings, group: str, replica: str) -> None:
        self.group = group
        self.replica = replica
        self.topic = events_topic(group)
        # acks=1: events are best-effort telemetry, never state; a leader's ack is enough
        self._producer = Producer(settings.client_config(**{
            "client.id": f"{replica}-events", "linger.ms": 20, "acks": "1",
        }))

    def emit(self, type_: str, **fields: Any) -> None:
        event = Event(ts=int(time.time() * 1000), group=self.group, replica=self.replica,
                      type=type_, fields=fields)
        try:
            self._producer.produce(self.topic, key=self.replica.encode(),
                                   value=orjson.dumps(event.to_dict()))
        except BufferError:
            log.warning("events buffer full; dropped a %s event", type_)
        self._producer.poll(0)

    def flush(self, timeout: float = 5.0) -> None:
        self._producer.flush(timeout)
