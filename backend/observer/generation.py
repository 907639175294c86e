"""Optional: the group's generation / epoch, read from `__consumer_offsets` when allowed.

The Admin API (DescribeGroups, ConsumerGroupDescribe as exposed by librdkafka 2.16) does not
report the generation, yet it is the one thing that reveals a rebalance which started and
finished between two polls without changing members or owners. The group coordinator
writes it to the group's partition of `__consumer_offsets` on every completed rebalance
(classic: GroupMetadataValue.generation; KIP-848: ConsumerGroupMetadataValue.epoch).

Reading that topic needs READ on an internal topic, which a least-privilege observer does
not have: then this source reports None and the timeline falls back to member and
assignment changes. Nothing is written or committed (see reader.py).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

from confluent_kafka import KafkaError, TopicPartition

from backend.kafka.settings import KafkaSettings
from backend.observer.reader import readonly_consumer

OFFSETS_TOPIC = "__consumer_offsets"
CLASSIC_GROUP_KEY = 2  # GroupMetadataKey / GroupMetadataValue
CONSUMER_GROUP_KEY = 3  # ConsumerGroupMetadataKey / ConsumerGroupMetadataValue
TARGET_ASSIGNMENT_KEY = 6  # ConsumerGroupTargetAssignmentMetadataKey / ...Value (KIP-848)
MAX_BACKLOG = 200_000  # records read back on start; compaction keeps the latest per key


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units, signed 32-bit)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition the coordinator uses for `group`."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _group_record(key: bytes | None, value: bytes | None, kinds: tuple[int, ...],
                  read: Callable[[int, bytes], int]) -> tuple[str, int | None] | None:
    """(group id, what `read` makes of the record type and value; None for a tombstone) for
    a record whose key is one of `kinds`, each of which starts with the group id; None for
    every other record type."""
    if not key or len(key) < 4:
        return None
    (kind,) = struct.unpack_from(">h", key, 0)
    if kind not in kinds:
        return None
    (glen,) = struct.unpack_from(">h", key, 2)
    group = key[4:4 + glen].decode("utf-8", "replace")
    if value is None:
        return group, None
    return group, read(kind, value)


def parse_group_record(key: bytes | None, value: bytes | None) -> tuple[str, int | None] | None:
    """(group id, generation or epoch; None for a tombstone) for a group metadata record,
    None for every other record type (offset commits, members, assignments...)."""
    return _group_record(key, value, (CLASSIC_GROUP_KEY, CONSUMER_GROUP_KEY), _generation)


def _generation(kind: int, value: bytes) -> int:
    """The generation (classic) or group epoch (KIP-848) in a group metadata value."""
    (version,) = struct.unpack_from(">h", value, 0)
    if kind == CONSUMER_GROUP_KEY:
        (epoch,) = struct.unpack_from(">i", value, 2)  # Epoch is the first field
        return epoch
    pos = 2  # classic: ProtocolType string, then Generation int32
    if version >= 4:  # flexible: compact string (length + 1)
        n, pos = _uvarint(value, pos)
        pos += max(0, n - 1)
    else:
        (n,) = struct.unpack_from(">h", value, pos)
        pos += 2 + max(0, n)
    (generation,) = struct.unpack_from(">i", value, pos)
    return generation


def parse_target_epoch(key: bytes | None, value: bytes | None) -> tuple[str, int | None] | None:
    """(group id, target-assignment epoch; None for a tombstone) for a KIP-848 group's
    ConsumerGroupTargetAssignmentMetadata record, None for every other record.

    The coordinator writes it when it computes a new target assignment; the group epoch
    moves first and the target epoch catches up to it, so "epoch 12, target epoch 11" means
    the assignor has not yet run for the latest change. Its value is AssignmentEpoch (int32),
    first after the version, as the group epoch is in record type 3.
    """
    return _group_record(key, value, (TARGET_ASSIGNMENT_KEY,),
                         lambda _, value: struct.unpack_from(">i", value, 2)[0])


class GenerationTail:
    """Follows one group's generation. `current()` drains what is new, then answers."""

    def __init__(self, settings: KafkaSettings, group: str) -> None:
        self.group = group
        self.generation: int | None = None
        self.changed_ms: int | None = None  # record timestamp of the latest change
        self.target_epoch: int | None = None  # KIP-848: the target assignment's epoch
        self.available = True
        self._consumer = None
        self._settings = settings
        self._tp: TopicPartition | None = None
        self._at_end = False
        self._retry_at = 0.0

    def _start(self) -> bool:
        now = time.monotonic()
        if now < self._retry_at:
            return False
        self._retry_at = now + 1.0
        consumer = readonly_consumer(self._settings, "generation", self.group)
        try:
            md = consumer.list_topics(topic=OFFSETS_TOPIC, timeout=5.0)
            t = md.topics.get(OFFSETS_TOPIC)
            if t is not None and t.error is not None and t.error.code() in (
                    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED):
                self.available = False  # least privilege: never allowed, stop asking
                raise LookupError
            if t is None or t.error is not None or not t.partitions:
                raise LookupError  # created with the first group; try again later
            p = offsets_partition(self.group, len(t.partitions))
            low, high = consumer.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, p),
                                                       timeout=5.0)
            start = max(low, high - MAX_BACKLOG)
            self._tp = TopicPartition(OFFSETS_TOPIC, p, start)
            consumer.assign([self._tp])
        except Exception:
            consumer.close()
            return False
        self._consumer = consumer
        return True

    def current(self, budget_s: float = 0.3) -> int | None:
        """Read up to the partition's end (or the budget) and return the generation."""
        if not self.available:
            return None
        if self._consumer is None and not self._start():
            return None
        deadline = time.monotonic() + budget_s
        while time.monotonic() < deadline:
            # at the end, take what the client has fetched meanwhile without waiting: a
            # consume() waits out its timeout unless its count fills, and the offsets topic
            # of a busy group never stops (a commit every batch), so waiting 50 ms a round
            # spent the whole budget, 0.3 s, on every poll
            msgs = self._consumer.consume(2000, timeout=0.0 if self._at_end else 0.05)
            if not msgs and self._at_end:
                break  # caught up, nothing new
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        self._at_end = True
                    elif err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                        KafkaError.GROUP_AUTHORIZATION_FAILED):
                        self.close()
                        self.available = False
                        return None
                    continue
                self._at_end = False
                self._note(msg)
            if self._at_end:
                break  # this round ended at the partition's end
        return self.generation

    def _note(self, msg) -> None:
        try:
            parsed = parse_group_record(msg.key(), msg.value())
            target = parse_target_epoch(msg.key(), msg.value()) if parsed is None else None
        except (struct.error, IndexError):
            return
        if target is not None and target[0] == self.group:
            self.target_epoch = target[1]
            return
        if parsed is None or parsed[0] != self.group:
            return
        if parsed[1] is not None and parsed[1] != self.generation:
            self.generation = parsed[1]
            self.changed_ms = msg.timestamp()[1]

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
