"""A share group's summaries, read back: its deltas topic tailed and folded in order.

The deltas topic (contracts.deltas_topic) holds one record per stream per batch, in the
order the share replicas wrote them; folding them in that order (`QueueSummary.fold`) is
what counts out-of-order arrivals. Read-only: assign() from the beginning, no group, no
commit. One reader per share group; `read()` is called from one thread (a poller's).
"""

from __future__ import annotations

import copy
import time

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from backend.contracts import deltas_topic
from backend.contracts.queue_summary import QueueDelta, QueueSummary
from backend.kafka.settings import KafkaSettings

READ_BUDGET_S = 0.5  # a read takes what has arrived within this, then answers


class QueueTail:
    def __init__(self, settings: KafkaSettings, group: str) -> None:
        self.group = group
        self.topic = deltas_topic(group)
        self.summaries: dict[str, QueueSummary] = {}
        self.deltas = 0
        self.bad = 0  # records that were not a delta (left out, counted)
        self._consumer = Consumer(settings.client_config(**{
            "group.id": f"groupscope-queue-tail-{group}", "enable.auto.commit": False,
            "enable.partition.eof": False}))
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])

    def read(self, budget_s: float = READ_BUDGET_S) -> dict[str, QueueSummary]:
        """Fold what arrived since the last read; a copy of every stream's summary."""
        deadline = time.monotonic() + budget_s
        while True:
            batch = self._consumer.consume(1000, max(0.0, deadline - time.monotonic()))
            deltas = []
            for m in batch:
                if m.error() is not None:
                    continue
                try:
                    deltas.append(QueueDelta.from_dict(orjson.loads(m.value())))
                except (ValueError, KeyError, TypeError):
                    self.bad += 1
            for d in deltas:  # in the topic's order: what out-of-order is counted against
                self.summaries.setdefault(d.stream_id,
                                          QueueSummary(d.stream_id, d.partition)).fold(d)
            self.deltas += len(deltas)
            if len(batch) < 1000 or time.monotonic() >= deadline:
                break
        return copy.deepcopy(self.summaries)

    def close(self) -> None:
        self._consumer.close()
