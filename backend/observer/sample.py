"""Read-only record sampling: which keys live in each partition, and when a record was written.

Two jobs, both with a time budget so a poll never waits on them for long:
- keys: the last few records of each partition give the streams of a foreign group
  (whose keys we cannot know in advance);
- timestamps: the record at a committed offset gives the exact age of a partition's lag.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, TopicPartition

from backend.cluster.settings import KafkaSettings
from backend.observer.reader import readonly_consumer


class Sampler:
    def __init__(self, settings: KafkaSettings, group: str) -> None:
        self._consumer = readonly_consumer(settings, "sampler", group)
        self._ts_cache: dict[tuple[str, int, int], int] = {}

    def sample_keys(self, topic: str, ends: Mapping[int, int], starts: Mapping[int, int],
                    per_partition: int = 20, budget_s: float = 1.0) -> dict[str, int]:
        """key -> partition it was seen in, from the last `per_partition` records of each."""
        assign = []
        for p, end in ends.items():
            first = max(starts.get(p, 0), end - per_partition)
            if end > first:
                assign.append(TopicPartition(topic, p, first))
        keys: dict[str, int] = {}
        if not assign:
            return keys
        remaining = {tp.partition: ends[tp.partition] for tp in assign}
        self._consumer.assign(assign)
        try:
            deadline = time.monotonic() + budget_s
            while remaining and time.monotonic() < deadline:
                for msg in self._consumer.consume(500, timeout=0.2):
                    p = msg.partition()
                    if msg.error():
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            remaining.pop(p, None)
                        continue
                    k = msg.key()
                    if k is not None:
                        keys[k.decode("utf-8", "replace")] = p
                    if msg.offset() + 1 >= remaining.get(p, 0):
                        remaining.pop(p, None)
        finally:
            self._consumer.unassign()
        return keys

    def timestamps(self, topic: str, offsets: Mapping[int, int],
                   budget_s: float = 0.5) -> dict[int, int]:
        """partition -> timestamp (ms) of the record at the given offset, cached by offset."""
        out: dict[int, int] = {}
        todo = []
        for p, off in offsets.items():
            cached = self._ts_cache.get((topic, p, off))
            if cached is not None:
                out[p] = cached
            else:
                todo.append(TopicPartition(topic, p, off))
        if not todo:
            return out
        self._consumer.assign(todo)
        wanted = {tp.partition: tp.offset for tp in todo}
        try:
            deadline = time.monotonic() + budget_s
            while wanted and time.monotonic() < deadline:
                for msg in self._consumer.consume(len(wanted) * 4 + 10, timeout=0.1):
                    p = msg.partition()
                    if p not in wanted:
                        continue
                    if msg.error():
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            wanted.pop(p, None)
                        continue
                    # compaction or transaction markers: the first record at/after it counts
                    if msg.offset() >= wanted[p]:
                        _, ts = msg.timestamp()
                        if ts > 0:
                            out[p] = ts
                            self._ts_cache[(topic, p, wanted[p])] = ts
                        wanted.pop(p)
        finally:
            self._consumer.unassign()
        if len(self._ts_cache) > 20000:
            self._ts_cache.clear()
        return out

    def close(self) -> None:
        self._consumer.close()
