"""Per-stream summaries: restored from the compacted changelog, written back after each batch.

The changelog (key = stream_id, partition = the input partition) is the replica's durable
state: a replica that dies loses nothing, because whoever gets its partitions reads their
changelog partitions to the end before processing a single input record.

At-least-once has no fence against a former owner: its write, queued while a broker was
away, can land after the new owner's. Two things keep such a stale summary out of the state:
the writer bounds how long a write may wait for delivery (runner's CHANGELOG_DELIVERY_MS,
two thirds of the demo's 6 s session), and a restore keeps, per stream, the summary
furthest along (`contracts.summary.further_along`, which the observer and the chaos
verifier read by too).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterable

import orjson
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from backend.contracts.summary import Summary, further_along
from backend.errors import one_line
from backend.kafka.settings import KafkaSettings

log = logging.getLogger("groupscope.replica")


class RestoreTimeout(RuntimeError):
    pass


# errors a consumer reports while a broker is away, which it recovers from by itself
_PASSING = (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
            KafkaError._DESTROY_BROKER)


class StateStore:
    """In-memory summaries of the streams in the owned partitions."""

    def __init__(self, settings: KafkaSettings, changelog: str, replica: str) -> None:
        self.settings = settings
        self.changelog = changelog
        self.replica = replica
        self.summaries: dict[str, Summary] = {}
        self._probe: Consumer | None = None
        self._reader: Consumer | None = None

    def open(self) -> None:
        """Make the restore's two clients now, before the replica joins its group, so the
        first assignment reads the changelog on connections already made (a client made
        inside the callback spent about a second on bootstrap and metadata alone)."""
        base = {
            "group.id": f"groupscope-restore-{uuid.uuid4().hex[:8]}",
            "client.id": f"{self.replica}-restore", "enable.auto.commit": False,
        }
        # The true end (high watermark) comes from a read_uncommitted query: a read_committed
        # one answers with the last stable offset, which lags a just-committed transaction
        # until its markers are written, and restoring only to there would lose a batch.
        self._probe = Consumer(self.settings.client_config(**base, **{
            "isolation.level": "read_uncommitted"}))
        self._reader = Consumer(self.settings.client_config(**base, **{
            "enable.partition.eof": True, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest"}))
        # a metadata request each: connected, and the changelog's leaders known
        for client in (self._probe, self._reader):
            client.list_topics(self.changelog, timeout=10.0)

    def _watermarks(self, probe: Consumer, partition: int, deadline: float) -> tuple[int, int]:
        """A changelog partition's (low, high) watermarks, asked again while its leader is
        away (a broker killed, its leadership moving), until the restore's deadline."""
        while True:
            try:
                return probe.get_watermark_offsets(TopicPartition(self.changelog, partition),
                                                   timeout=10.0)
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    raise RestoreTimeout(f"changelog {self.changelog} partition {partition}: "
                                         f"no watermarks before the deadline "
                                         f"({one_line(exc)})") from None
                log.warning("changelog %s[%d] watermarks: %s; asking again", self.changelog,
                            partition, exc)
                time.sleep(0.5)
                # The probe reads no topic, so nothing else asks for its metadata: after a
                # broker restart one CI run saw "Unknown partition" for the whole 60 s
                # deadline. Ask for the changelog's metadata again before the next try.
                with contextlib.suppress(KafkaException):
                    probe.list_topics(self.changelog, timeout=5.0)

    def close(self) -> None:
        for client in (self._probe, self._reader):
            if client is not None:
                client.close()
        self._probe = self._reader = None

    def streams_in(self, partitions: Iterable[int]) -> list[str]:
        wanted = set(partitions)
        return sorted(s.stream_id for s in self.summaries.values() if s.partition in wanted)

    def last_seqs(self) -> dict[str, int]:
        return {sid: s.last_seq for sid, s in self.summaries.items()}

    def drop(self, partitions: Iterable[int]) -> None:
        wanted = set(partitions)
        for sid in [sid for sid, s in self.summaries.items() if s.partition in wanted]:
            del self.summaries[sid]

    def restore(self, partitions: Iterable[int], timeout: float = 60.0) -> int:
        """Read the changelog partitions to their end (read_committed); return streams restored.

        In exactly-once mode a crashed owner may leave an open transaction: the last stable
        offset then stays below the high watermark until the broker aborts it (the producer's
        transaction timeout), and we wait for that rather than restore a stale state.
        """
        parts = sorted(set(partitions))
        if not parts:
            return 0
        if self._probe is None or self._reader is None:
            self.open()
        probe, consumer = self._probe, self._reader
        assert probe is not None and consumer is not None
        self.drop(parts)  # the changelog is the truth: `further_along` compares within it
        deadline = time.monotonic() + timeout
        targets: dict[int, int] = {}
        for p in parts:
            low, high = self._watermarks(probe, p, deadline)
            if high > low:
                targets[p] = high
        found: set[str] = set()
        if not targets:
            return 0
        try:
            consumer.assign([TopicPartition(self.changelog, p, OFFSET_BEGINNING) for p in targets])
            while targets:
                if time.monotonic() > deadline:
                    raise RestoreTimeout(
                        f"changelog {self.changelog} partitions {sorted(targets)} not read to "
                        f"their end within {timeout:.0f}s")
                # consume() waits out its timeout unless the count fills: keep it short, a
                # restore of a few summaries would otherwise wait the whole of it
                for msg in consumer.consume(500, 0.05):
                    err = msg.error()
                    p = msg.partition()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            if p in targets and msg.offset() >= targets[p]:
                                del targets[p]
                            continue
                        if err.retriable() or err.code() in _PASSING:
                            log.warning("changelog restore: %s (the client retries)", err)
                            continue  # a node away; the deadline bounds the wait
                        raise RuntimeError(f"changelog restore failed: {err}")
                    if msg.value() is None:  # tombstone
                        self.summaries.pop(msg.key().decode(), None)
                        continue
                    summary = Summary.from_dict(orjson.loads(msg.value()))
                    kept = self.summaries.get(summary.stream_id)
                    if further_along(kept.count if kept else None, summary.count):
                        self.summaries[summary.stream_id] = summary
                    else:
                        log.warning("changelog %s[%d] offset %d: a stale summary of %s "
                                    "(%d records, %d kept) written by %s; not restored",
                                    self.changelog, p, msg.offset(), summary.stream_id,
                                    summary.count, kept.count if kept else 0, summary.replica)
                    found.add(summary.stream_id)
                    if p in targets and msg.offset() + 1 >= targets[p]:
                        del targets[p]
        finally:
            consumer.unassign()
        return len(found)
