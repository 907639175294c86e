"""A share-group replica (KIP-932, "queues"): the same Spark summariser, on a share consumer.

Each poll's records are one batch, because a share consumer must acknowledge every record
of a poll before it polls again (explicit acknowledgement mode). Per batch, in this order:

1. Spark summarises it (share_spark): one `QueueDelta` per stream;
2. the deltas go to the group's deltas topic and malformed records to its dead letters,
   and the producer's flush confirms both (acks=all);
3. only then are the records acknowledged: ACCEPT the summarised ones, REJECT the malformed
   ones (they are in the dead letters), and the acknowledgements committed.

A failure before step 3 (Spark down, a write refused) RELEASEs the batch: the broker hands
those records out again (to this member or another) with a higher delivery count. A replica
killed between steps 2 and 3 leaves records summarised but unacknowledged; they come back
after the lock time and are summarised again, which the summaries count as duplicates,
never as lost (contracts.queue_summary). A share replica keeps no state between batches:
any member may take any record, so there is nothing to restore.

librdkafka marks its share consumer "Preview"; so does groupscope.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import orjson
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer

from backend.contracts import (
    DEFAULT_SHARE_GROUP,
    INPUT_TOPIC,
    EventType,
    dead_letter_topic,
    deltas_topic,
)
from backend.errors import one_line
from backend.kafka.settings import KafkaSettings
from backend.kafka.share import ensure_share_group
from backend.kafka.telemetry import Telemetry
from backend.replica.batch import MicroBatch
from backend.replica.deadletter import DeadLetter
from backend.replica.runner import BACKOFF_MAX_S, HEARTBEAT_S
from backend.replica.share_spark import summarise_share
from backend.replica.spark_summary import SparkSummariser

log = logging.getLogger("groupscope.replica")

REDELIVERIES_NAMED = 5  # a `redelivered` event names this many records, counts the rest


def offset_spans(messages: list) -> list[tuple[int, int, int]]:
    """(partition, first offset, last offset) of `messages`, per partition: which records a
    member took, in a line's room whatever their number."""
    spans: dict[int, list[int]] = {}
    for m in messages:
        lo_hi = spans.setdefault(m.partition(), [m.offset(), m.offset()])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], m.offset()), max(lo_hi[1], m.offset())
    return [(p, lo, hi) for p, (lo, hi) in sorted(spans.items())]


def held_ranges(messages: list) -> str:
    """The log line's form of `offset_spans`: "P0 100-139, P2 7-9"."""
    return ", ".join(f"P{p} {lo}-{hi}" for p, lo, hi in offset_spans(messages))


@dataclass(frozen=True)
class ShareReplicaConfig:
    name: str
    group: str = DEFAULT_SHARE_GROUP
    topic: str = INPUT_TOPIC
    spark_remote: str | None = None
    max_records: int = 5000  # records one poll may acquire (the share consumer's cap)
    poll_s: float = 1.0  # how long a poll waits for records (--batch-ms)


@dataclass
class Polled:
    """One poll's records as a batch, with what acknowledging them needs."""

    batch: MicroBatch
    messages: list  # the Message objects, to acknowledge
    deliveries: dict[tuple[int, int], int]  # (partition, offset) -> delivery count
    acquired_at: float  # time.monotonic() when the poll returned them


class ShareReplica:
    def __init__(self, cfg: ShareReplicaConfig, settings: KafkaSettings,
                 spark: SparkSummariser | None = None) -> None:
        self.cfg = cfg
        self.settings = settings
        self.spark = spark or SparkSummariser(cfg.spark_remote)
        self.telemetry = Telemetry(settings, cfg.group, cfg.name)
        self.stopping = False
        self.processed = 0  # records acknowledged ACCEPT
        self.rejected = 0  # records acknowledged REJECT (dead letters)
        self.released = 0  # records given back after a failed batch
        self.redelivered = 0  # records received with a delivery count >= 2
        self.batches = 0
        self.held_s = 0.0  # record-seconds between acquiring records and acknowledging them
        self.last_batch_ms: float | None = None  # the last batch's Spark time
        self._consumer: ShareConsumer | None = None
        self._producer: Producer | None = None
        self._failures = 0

    # ---- set-up ----------------------------------------------------------------------

    def setup(self) -> None:
        """The group's topics and its start at the earliest offset (idempotent)."""
        ensure_share_group(self.settings, self.cfg.group)

    def _clients(self) -> tuple[ShareConsumer, Producer]:
        if self._consumer is None:
            self._consumer = ShareConsumer(self.settings.client_config(**{
                "group.id": self.cfg.group, "client.id": self.cfg.name,
                "share.acknowledgement.mode": "explicit",
                "max.poll.records": self.cfg.max_records,
            }))
            self._consumer.subscribe([self.cfg.topic])
            self._producer = Producer(self.settings.client_config(**{
                "client.id": f"{self.cfg.name}-deltas", "acks": "all",
                "enable.idempotence": True, "linger.ms": 5}))
        assert self._producer is not None
        return self._consumer, self._producer

    # ---- the loop --------------------------------------------------------------------

    def run(self, max_batches: int | None = None) -> None:
        """Poll, summarise, write, acknowledge until `stop()` (or `max_batches` batches)."""
        consumer, _ = self._clients()
        self.telemetry.emit(EventType.STARTED, share=True, topic=self.cfg.topic)
        beat = (time.monotonic(), self.processed, self.held_s)
        try:
            while not self.stopping and (max_batches is None or self.batches < max_batches):
                if not self._failures or self._spark_answers():
                    polled = self._poll(consumer)
                    if polled is not None:
                        self._handle(consumer, polled)
                if time.monotonic() - beat[0] >= HEARTBEAT_S:
                    beat = self._heartbeat(*beat)
        finally:
            self.close()

    def _spark_answers(self) -> bool:
        """After a failed batch: whether Spark answers again. Until it does, the replica
        takes no records. Each batch it took and gave back would count a delivery against
        every record in it, and the broker hands the lowest released offsets out first, so
        the same records came back to it again and again: at the broker's delivery limit (5
        by default) a record is archived, never summarised by anyone. The members whose
        Spark works take them instead."""
        try:
            self.spark.keep_alive()
        except Exception as exc:  # still down: stay a member, take nothing, back off
            self.spark.reset()
            self._failures += 1
            log.warning("Spark still unreachable (%s): taking no records", one_line(exc))
            self._back_off()
            return False
        self._failures = 0
        return True

    def _back_off(self) -> None:
        """Sleep the failures' back-off (doubling to BACKOFF_MAX_S), waking for a stop."""
        until = time.monotonic() + min(BACKOFF_MAX_S, 0.5 * 2 ** (self._failures - 1))
        while not self.stopping and time.monotonic() < until:
            time.sleep(min(0.2, max(0.0, until - time.monotonic())))

    def _heartbeat(self, since: float, processed: int, held_s: float
                   ) -> tuple[float, int, float]:
        """The counters, and over the interval since the last heartbeat the records/s
        accepted and the mean number of records held (in flight: acquired, not yet
        acknowledged), which is record-seconds held per second. Heartbeats fall between
        batches, so every batch's holding time lies in one interval."""
        now = time.monotonic()
        elapsed = max(1e-6, now - since)
        self.telemetry.emit(
            EventType.HEARTBEAT, share=True, processed=self.processed, rejected=self.rejected,
            released=self.released, redelivered=self.redelivered, batches=self.batches,
            rate=round((self.processed - processed) / elapsed, 1),
            in_flight=round((self.held_s - held_s) / elapsed, 1),
            last_batch_ms=None if self.last_batch_ms is None else round(self.last_batch_ms, 1))
        return now, self.processed, self.held_s

    def stop(self) -> None:
        self.stopping = True

    def _poll(self, consumer: ShareConsumer) -> Polled | None:
        messages = [m for m in consumer.poll(self.cfg.poll_s) if m is not None]
        batch, deliveries, good = MicroBatch(), {}, []
        for m in messages:
            if m.error() is not None:
                log.warning("share poll: %s", one_line(m.error()))
                continue
            good.append(m)
            batch.add(m.partition(), m.offset(), m.key(), m.value())
            deliveries[(m.partition(), m.offset())] = m.delivery_count()
        if not good:
            return None
        log.info("acquired %d records (%s)", len(good), held_ranges(good))
        self._report_redeliveries(good)
        return Polled(batch, good, deliveries, time.monotonic())

    def _handle(self, consumer: ShareConsumer, polled: Polled) -> None:
        table, bad = polled.batch.to_typed_arrow()
        dead = polled.batch.dead + bad
        try:
            counts = [polled.deliveries[(p, o)] for p, o in zip(
                table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                strict=True)]
            deltas, seconds = (summarise_share(self.spark, table, counts, self.cfg.name)
                               if table.num_rows else ({}, 0.0))
            self._write(deltas.values(), dead)
        except Exception as exc:  # Spark or the broker: give the records back, back off
            self._acknowledge(consumer, polled, lambda _m: AcknowledgeType.RELEASE)
            self.released += len(polled.messages)
            self._failures += 1
            log.warning("share batch of %d records released (%s)", len(polled.messages),
                        one_line(exc))
            self.telemetry.emit(EventType.ERROR, error=one_line(exc)[:300], share=True)
            self._back_off()
            return
        self._failures = 0
        rejected = {(d.partition, d.offset) for d in dead}
        self._acknowledge(consumer, polled,
                          lambda m: AcknowledgeType.REJECT
                          if (m.partition(), m.offset()) in rejected else AcknowledgeType.ACCEPT)
        self.processed += len(polled.messages) - len(rejected)
        self.rejected += len(rejected)
        self.batches += 1
        self.last_batch_ms = seconds * 1000
        log.info("share batch: %d records, %d streams, Spark %.0f ms", table.num_rows,
                 len(deltas), seconds * 1000)

    def _write(self, deltas, dead: list[DeadLetter]) -> None:
        """The batch's deltas and dead letters, durable before anything is acknowledged."""
        _, producer = self._clients()
        g = self.cfg.group
        errors: list[str] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                errors.append(one_line(err))

        for d in deltas:
            producer.produce(deltas_topic(g), key=d.stream_id.encode(),
                             value=orjson.dumps(d.to_dict()), on_delivery=delivered)
        for d in dead:
            producer.produce(dead_letter_topic(g), key=d.key, value=d.publish_value(),
                             headers=d.headers(self.cfg.topic, self.cfg.name),
                             on_delivery=delivered)
        left = producer.flush(30)
        if left or errors:
            raise KafkaException(f"deltas not written: {errors[0] if errors else f'{left} left'}")

    def _acknowledge(self, consumer: ShareConsumer, polled: Polled, kind) -> None:
        for m in polled.messages:
            consumer.acknowledge(m, kind(m))
        try:
            answers = consumer.commit_sync(30)
        finally:
            self.held_s += len(polled.messages) * (time.monotonic() - polled.acquired_at)
        for tp, err in answers.items():
            if err is not None:  # the lock expired meanwhile: the record went to another
                log.warning("acknowledgement of %s[%d] refused: %s", tp.topic, tp.partition,
                            one_line(err))

    def _report_redeliveries(self, messages: list) -> None:
        again = [m for m in messages if m.delivery_count() >= 2]
        if not again:
            return
        self.redelivered += len(again)
        self.telemetry.emit(EventType.REDELIVERED, share=True, count=len(again),
                            spans=[list(x) for x in offset_spans(again)], records=[
            {"key": (m.key() or b"").decode(errors="replace"), "partition": m.partition(),
             "offset": m.offset(), "delivery": m.delivery_count()}
            for m in again[:REDELIVERIES_NAMED]])

    def close(self) -> None:
        """Leave the group (acquired, unacknowledged records are released at once)."""
        self.telemetry.emit(EventType.STOPPED, share=True, processed=self.processed)
        self.telemetry.flush()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception as exc:  # closing must not hide why the loop ended
                log.warning("share consumer close: %s", one_line(exc))
        if self._producer is not None:
            self._producer.flush(10)
        self.spark.reset()
