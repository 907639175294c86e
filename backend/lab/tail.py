"""What each lab group's replicas processed and gave up, read from their summaries changelogs
(a share group's: its deltas topic) and events topics as it happens.

One consumer for every group (assign(), no group, no commit: it changes nothing it reads),
from the changelogs' ends when the lab starts, so only this run's batches count. Partitions
the topic gains later (the `partitions` event) are picked up from their beginning. `read()`
is called from one thread, the lab's loop.
"""

from __future__ import annotations

import time

import orjson
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

from backend.contracts import EventType, deltas_topic, events_topic, summaries_topic
from backend.kafka.settings import KafkaSettings
from backend.lab.measure import Processed, Stopped

REFRESH_S = 2.0  # how often the changelogs' partition counts are looked up again


def share_write(delta: dict, redelivered: dict[str, int]) -> Processed:
    """A share replica's delta as a processed batch of its record's partition. Its records
    delivered more than once (Kafka's delivery count) are records processed again; added up
    per stream in `redelivered`, they play the consumer replicas' duplicate counts."""
    stream = str(delta["stream_id"])
    again = sum(int(n) for count, n in (delta.get("deliveries") or {}).items()
                if int(count) >= 2)
    redelivered[stream] = redelivered.get(stream, 0) + again
    return Processed(t_ms=int(delta["taken_ms"]), partition=int(delta["partition"]),
                     replica=str(delta["replica"]), stream=stream,
                     duplicates=redelivered[stream])


class ProcessedTail:
    def __init__(self, settings: KafkaSettings, groups: list[str],
                 share: set[str] | frozenset[str] = frozenset()) -> None:
        # a consumer group's summaries changelog (co-partitioned with the input), a share
        # group's deltas topic (one partition; each delta names its record's partition)
        self.topics = {summaries_topic(g): g for g in groups if g not in share}
        self.deltas = {deltas_topic(g): g for g in groups if g in share}
        self._redelivered: dict[str, dict[str, int]] = {g: {} for g in share}
        self.events = {events_topic(g): g for g in groups}
        self.writes: dict[str, list[Processed]] = {g: [] for g in groups}
        self.stops: dict[str, list[Stopped]] = {g: [] for g in groups}
        self.latest: dict[str, dict[int, int]] = {g: {} for g in groups}  # partition → ms
        # partition → the replica that processed its latest batch
        self.owner: dict[str, dict[int, str]] = {g: {} for g in groups}
        self.by_replica: dict[str, dict[str, int]] = {g: {} for g in groups}  # name → ms
        self.bad = 0  # records that were not a summary (left out, counted)
        self._consumer = Consumer(settings.client_config(**{
            "group.id": f"groupscope-lab-tail-{time.time_ns()}", "enable.auto.commit": False,
            "enable.partition.eof": False}))
        self._assigned: dict[str, int] = {}
        self._refreshed = 0.0
        self._refresh(OFFSET_END)

    def _refresh(self, new_from: int) -> None:
        meta = self._consumer.list_topics(timeout=10).topics
        added = []
        for topic in (*self.topics, *self.deltas, *self.events):
            have = len(meta[topic].partitions) if topic in meta else 0
            added += [TopicPartition(topic, p, new_from)
                      for p in range(self._assigned.get(topic, 0), have)]
            self._assigned[topic] = max(have, self._assigned.get(topic, 0))
        if added:
            self._consumer.incremental_assign(added)
        self._refreshed = time.monotonic()

    def read(self, budget_s: float = 0.2) -> None:
        """Take in what arrived, for up to `budget_s`."""
        if time.monotonic() - self._refreshed >= REFRESH_S:
            try:
                self._refresh(OFFSET_BEGINNING)
            except KafkaException:  # a broker too busy to answer: the partitions it has
                self._refreshed = time.monotonic()  # are still read; asked again later
        deadline = time.monotonic() + budget_s
        while True:
            batch = self._consumer.consume(1000, max(0.0, deadline - time.monotonic()))
            for m in batch:
                if m.error() is not None or m.value() is None:
                    continue
                if m.topic() in self.events:
                    self._event(self.events[m.topic()], m.value())
                    continue
                group = self.topics.get(m.topic()) or self.deltas[m.topic()]
                try:
                    s = orjson.loads(m.value())
                    if m.topic() in self.deltas:
                        w = share_write(s, self._redelivered[group])
                    else:
                        w = Processed(t_ms=int(s["updated_ms"]), partition=m.partition(),
                                      replica=str(s["replica"]), stream=str(s["stream_id"]),
                                      duplicates=int(s.get("duplicates", 0)))
                except (ValueError, KeyError, TypeError, AttributeError):
                    self.bad += 1
                    continue
                self.writes[group].append(w)
                latest = self.latest[group]
                if w.t_ms >= latest.get(w.partition, 0):
                    latest[w.partition] = w.t_ms
                    self.owner[group][w.partition] = w.replica
                named = self.by_replica[group]
                named[w.replica] = max(named.get(w.replica, 0), w.t_ms)
            if len(batch) < 1000 or time.monotonic() >= deadline:
                return

    def _event(self, group: str, value: bytes) -> None:
        """A revoked or lost event: the replica stopped processing those partitions."""
        try:
            e = orjson.loads(value)
            if e.get("type") in (EventType.REVOKED, EventType.LOST):
                self.stops[group] += [Stopped(int(e["ts"]), int(p), str(e["replica"]))
                                      for p in e.get("partitions") or ()]
        except (ValueError, KeyError, TypeError, AttributeError):
            self.bad += 1

    def forget(self, before_ms: int) -> None:
        """Drop the writes and stops older than `before_ms`: a lab left running for an hour
        keeps only what its next measurement can look at."""
        for group, writes in self.writes.items():
            self.writes[group] = [w for w in writes if w.t_ms >= before_ms]
        for group, stops in self.stops.items():
            self.stops[group] = [s for s in stops if s.t_ms >= before_ms]

    def close(self) -> None:
        self._consumer.close()
