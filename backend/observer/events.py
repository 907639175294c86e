"""Tail our own groups' events and summaries topics, read-only (assign(), no commits).

Only for groups groupscope runs: a foreign group has no such topics and the tail stays
empty. `poll()` never blocks for long; the observer calls it once per cycle.
"""

from __future__ import annotations

import time
from collections import deque

import orjson
from confluent_kafka import KafkaError, TopicPartition

from backend.contracts import Event, EventType, events_topic, summaries_topic
from backend.contracts.summary import fold_raw
from backend.kafka.settings import KafkaSettings
from backend.observer.reader import readonly_consumer


class TopicTail:
    """Reads every partition of one topic from a point in time on, if the topic exists."""

    def __init__(self, settings: KafkaSettings, topic: str, since_ms: int | None,
                 purpose: str, group: str) -> None:
        self.topic = topic
        self.since_ms = since_ms
        self._consumer = readonly_consumer(settings, purpose, group)
        self._assigned = False
        self._checked = 0.0
        self._behind: set[int] = set()  # partitions not yet read to their end once

    def _ensure_assigned(self) -> bool:
        if self._assigned:
            return True
        now = time.monotonic()
        if now - self._checked < 5.0:
            return False
        self._checked = now
        md = self._consumer.list_topics(topic=self.topic, timeout=2.0)
        t = md.topics.get(self.topic)
        if t is None or t.error is not None or not t.partitions:
            return False
        tps = [TopicPartition(self.topic, p) for p in sorted(t.partitions)]
        if self.since_ms is None:
            for tp in tps:
                tp.offset = -2  # beginning: a compacted table is read whole
        else:
            for tp in tps:
                tp.offset = self.since_ms
            tps = self._consumer.offsets_for_times(tps, timeout=5.0)
            for tp in tps:
                if tp.offset < 0:
                    tp.offset = -1  # nothing newer: start at the end
        self._consumer.assign(tps)
        self._assigned = True
        self._behind = {tp.partition for tp in tps}
        return True

    def poll(self, max_messages: int = 5000, timeout: float = 0.05) -> list:
        """What arrived since the last poll. Until every partition has been read to its end
        once, this waits up to `timeout` a round (a first poll returns the backlog, as
        `groupscope snapshot` needs); after that it takes only what the client has already
        fetched, without waiting: a consume() waits out its whole timeout unless its count
        fills, which cost every observer poll 50 ms per tail."""
        try:
            if not self._ensure_assigned():
                return []
        except Exception:
            return []
        out = []
        deadline = time.monotonic() + timeout
        while True:
            wait = max(0.0, deadline - time.monotonic()) if self._behind else 0.0
            msgs = self._consumer.consume(max_messages - len(out), timeout=wait)
            for msg in msgs:
                err = msg.error()
                if err is None:
                    out.append(msg)
                elif err.code() == KafkaError._PARTITION_EOF:
                    self._behind.discard(msg.partition())
            if (not self._behind or not msgs or len(out) >= max_messages
                    or time.monotonic() >= deadline):
                return out

    def close(self) -> None:
        self._consumer.close()


class EventTail:
    """Recent replica events of one group plus the latest summary per stream."""

    def __init__(self, settings: KafkaSettings, group: str, lookback_s: float = 600.0,
                 keep: int = 500) -> None:
        since = int((time.time() - lookback_s) * 1000)
        # Heartbeats arrive every ~2 s per replica and would push the stream events out of
        # a shared buffer; only the latest one per replica is needed (rates, batch time).
        self.events: deque[Event] = deque(maxlen=keep)
        self.heartbeats: dict[str, Event] = {}
        self._keep = keep
        self.summaries: dict[str, dict] = {}
        self._events = TopicTail(settings, events_topic(group), since, "events", group)
        self._summaries = TopicTail(settings, summaries_topic(group), None, "summaries",
                                    group)

    def poll(self) -> None:
        for msg in self._events.poll():
            try:
                event = Event.from_dict(orjson.loads(msg.value()))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue  # a malformed event is skipped, never fatal
            if event.type == EventType.HEARTBEAT:
                self.heartbeats.pop(event.replica, None)  # re-insert: newest last
                self.heartbeats[event.replica] = event
                while len(self.heartbeats) > self._keep:
                    self.heartbeats.pop(next(iter(self.heartbeats)))
            else:
                self.events.append(event)
        for msg in self._summaries.poll():
            key = msg.key()
            if key is None:
                continue
            try:
                value = None if msg.value() is None else orjson.loads(msg.value())
            except orjson.JSONDecodeError:
                continue
            # as a replica restoring it would: a former owner's late write is not the newest
            fold_raw(self.summaries, key.decode("utf-8", "replace"), value)

    def recent(self, n: int = 100) -> tuple[Event, ...]:
        """The last `n` non-heartbeat events, then the latest heartbeat of each replica."""
        return (*list(self.events)[-n:], *self.heartbeats.values())

    def close(self) -> None:
        self._events.close()
        self._summaries.close()
