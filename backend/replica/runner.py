"""The replica process: consume, micro-batch, summarise with Spark, persist, commit, report.

Ordering guarantees (why each step is where it is):
- assignment: restore the partitions' summaries from the changelog *before* the client may
  fetch them (inside the assign callback);
- each batch: Spark aggregates, summaries are merged on copies, then written to the
  changelog; offsets are committed only once those writes are acknowledged (at-least-once),
  or summaries + offsets go in one Kafka transaction (`--commit transactional`). The two
  careless modes of `COMMIT_MODES` exist to be shown losing records: `before-processing`
  commits a batch's offsets before Spark sees it, `auto` lets the client commit what it
  has read every AUTO_COMMIT_MS;
- revocation: the revoked partitions' pending records are flushed and committed first;
- loss (session expired, fenced): pending records are dropped, nothing is committed;
- a failed batch (Spark down, or the broker refusing the write or commit): partitions are
  paused (polling continues, so the membership is kept), nothing is committed, the batch is
  retried with backoff and the partitions resumed afterwards. Each partition's pause state is
  set explicitly right after it is assigned (paused while backing off, resumed otherwise):
  librdkafka keeps a pause across a rebalance that hands the partition back (its issue #1849),
  so a partition lost while paused (broker restart: session expired) would otherwise come back
  paused for good; and a pause before `assign()` has no effect;
- a rate cap (`--max-rate`): each consume takes at most what the cap allows now, and out of
  allowance the loop waits a moment without consuming (for a cap under 2 msg/s it pauses the
  assignment the same way as above instead, PauseBook keeping the two reasons apart, and
  polls on so the member still hears its rebalances); the prefetch is bounded, so records
  beyond the cap wait in Kafka, where they show as lag.
"""

from __future__ import annotations

import copy
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from backend.contracts import (
    AFTER_SUMMARY,
    AUTO_COMMIT,
    BEFORE_PROCESSING,
    INPUT_TOPIC,
    TRANSACTIONAL,
    EventType,
    dead_letter_topic,
    summaries_topic,
)
from backend.contracts.summary import Summary
from backend.errors import one_line
from backend.kafka.settings import KafkaSettings
from backend.kafka.telemetry import Telemetry
from backend.kafka.topics import TopicError, ensure_topics
from backend.proc import StopSignals, seconds_since_start
from backend.replica.batch import BatchSizing, MicroBatch
from backend.replica.context import StreamingContext, log_received, log_revoked
from backend.replica.deadletter import DeadLetter
from backend.replica.membership import (
    SESSION_TIMEOUT_MS,
    GroupChoice,
    PauseBook,
    RateGate,
    Rebalancer,
)
from backend.replica.spark_summary import SparkSummariser
from backend.replica.state import StateStore

log = logging.getLogger("groupscope.replica")

HEARTBEAT_S = 2.0
AUTO_COMMIT_MS = 5000  # librdkafka's default, as `enable.auto.commit` tutorials leave it
BACKOFF_MAX_S = 10.0
# how long an at-least-once changelog write may wait for delivery before it fails: well
# inside the session timeout, so it cannot land after the group has moved its partitions
CHANGELOG_DELIVERY_MS = SESSION_TIMEOUT_MS * 2 // 3
# an error event's text: one line, short, since every reader of the events topic gets it
EVENT_ERROR_CHARS = 300


@dataclass(frozen=True)
class ReplicaConfig:
    name: str
    group: str
    topic: str = INPUT_TOPIC
    choice: GroupChoice = field(default_factory=GroupChoice)
    commit: str = AFTER_SUMMARY  # one of contracts.COMMIT_MODES
    spark_remote: str | None = None
    batch_ms: int = 1000
    batch_max: int = 20_000
    feed: str = "typed"  # typed | raw: see bench/replica_batch.py
    static: bool = False  # group.instance.id = name: a quick restart moves no partition
    max_rate: float | None = None  # records/s taken at most, on average; None: no cap

    @property
    def exactly_once(self) -> bool:
        return self.commit == TRANSACTIONAL


class Replica:
    def __init__(self, cfg: ReplicaConfig, settings: KafkaSettings,
                 context: StreamingContext | None = None,
                 spark: SparkSummariser | None = None) -> None:
        """`spark`: a session a standby process warmed before it knew its name (`groupscope
        replica --standby`); then start-up is counted from here, not from the process's
        start."""
        self.cfg = cfg
        self.settings = settings
        self.context = context or StreamingContext()
        self.telemetry = Telemetry(settings, cfg.group, cfg.name)
        self.state = StateStore(settings, summaries_topic(cfg.group), cfg.name)
        self.spark = spark or SparkSummariser(cfg.spark_remote)
        created = time.monotonic()
        self._since_start = ((lambda: time.monotonic() - created) if spark is not None
                             else seconds_since_start)
        self.batch = MicroBatch()
        self.sizing = BatchSizing(cfg.batch_ms, cfg.batch_max)
        # Spark runs on this worker while the main thread keeps serving the group (see
        # `_summarise`); partitions revoked or lost meanwhile are voided for the batch in flight.
        self._spark_worker = ThreadPoolExecutor(1, thread_name_prefix="spark")
        self._voided: set[int] = set()
        self.stopping = False
        self.processed = 0
        self.dead_letters = 0
        self.batches = 0
        self.last_batch_ms: float | None = None
        self.pauses = PauseBook()  # backing off, waiting on a low cap, and what is paused
        self.gate = RateGate(cfg.max_rate)
        self.spark_ok = True
        self._retry_at = 0.0
        self._backoff = 0.5
        self._hb_at = 0.0
        self._hb_processed = 0
        self._hb_closures = 0
        self._hb_time = time.monotonic()
        self.consumer: Consumer | None = None
        self.producer: Producer | None = None
        self.rebalancer = Rebalancer(cfg.topic, cfg.choice.incremental, self._assigned,
                                     self._revoked, self._lost, after_assign=self._settle_flow)

    # ---- setup -----------------------------------------------------------------------

    def _make_clients(self) -> None:
        cfg = self.cfg
        auto = cfg.commit == AUTO_COMMIT  # offsets stored as read, committed on a timer
        conf = self.settings.client_config(**{
            "group.id": cfg.group, "client.id": cfg.name,
            "enable.auto.commit": auto, "enable.auto.offset.store": auto,
            **({"auto.commit.interval.ms": AUTO_COMMIT_MS} if auto else {}),
            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
            "error_cb": self._on_kafka_error,
            **cfg.choice.consumer_properties(cfg.name if cfg.static else None),
            **self.gate.consumer_properties(),
        })
        self.consumer = Consumer(conf)
        # acks=all (idempotence implies it): a summary is durable once every in-sync copy
        # has it, so a broker dying right after the commit loses nothing
        pconf: dict[str, Any] = {"client.id": f"{cfg.name}-state", "linger.ms": 5,
                                 "enable.idempotence": True, "acks": "all"}
        if cfg.exactly_once:
            pconf["transactional.id"] = f"groupscope-{cfg.group}-{cfg.name}"
            pconf["transaction.timeout.ms"] = 10_000
        else:
            # Nothing fences a former owner's write (see backend/replica/state.py): one
            # queued while a broker is away must fail before the group can give the
            # partitions to another member, not land after that member's newer summaries.
            pconf["message.timeout.ms"] = CHANGELOG_DELIVERY_MS
            pconf["request.timeout.ms"] = CHANGELOG_DELIVERY_MS
        self.producer = Producer(self.settings.client_config(**pconf))
        if cfg.exactly_once:
            self.producer.init_transactions(30)

    def _on_kafka_error(self, err: Any) -> None:
        log.warning("kafka: %s", err)
        if getattr(err, "fatal", lambda: False)():
            self.telemetry.emit(EventType.ERROR, error=f"fatal Kafka error: {err}")
            self.stopping = True

    # ---- main loop -------------------------------------------------------------------

    def request_stop(self, *_: Any) -> None:
        self.stopping = True

    def run(self) -> int:
        """Until SIGTERM / SIGINT: then finish the batch, commit and leave the group, within
        STOP_WITHIN_S whatever the broker and Spark do (StopSignals' watchdog)."""
        with StopSignals(on_stop=self.request_stop):
            return self._run()

    def _run(self) -> int:
        """Get ready on two threads, then join: Spark (importing pyspark, a session, the
        first query: the longest part) warms up on the Spark worker while this thread makes
        the topics, the Kafka clients and the restore's connections; the replica joins its
        group only once both are done, so a member never holds partitions it cannot yet
        process."""
        cfg = self.cfg
        warm = self._spark_worker.submit(self._warm_up)
        try:
            self._ensure_topics()
            self.telemetry.emit(EventType.STARTED, protocol=cfg.choice.protocol,
                                assignor=cfg.choice.assignor, exactly_once=cfg.exactly_once,
                                commit=cfg.commit, topic=cfg.topic, static=cfg.static,
                                max_rate=cfg.max_rate)
            self._make_clients()
            self.state.open()
        except BaseException:
            # the warm-up retries until stopped: stop it, or the process could not exit
            self.stopping = True
            self._spark_worker.shutdown(wait=False, cancel_futures=True)
            raise
        kafka_ready = self._since_start()
        while not warm.done():
            try:
                warm.result(timeout=0.1)
            except FutureTimeout:
                continue
        log.info("ready in %.2f s (Kafka clients %.2f s, Spark warm-up %.2f s); joining %s",
                 self._since_start(), kafka_ready, warm.result(), cfg.group)
        if self.stopping:
            self._close_clients()
            return self._stopped()
        assert self.consumer is not None
        self.consumer.subscribe([cfg.topic], on_assign=self.rebalancer.on_assign,
                                on_revoke=self.rebalancer.on_revoke,
                                on_lost=self.rebalancer.on_lost)
        try:
            while not self.stopping:
                self._poll_once()
            self._drain_on_stop()
        finally:
            self._spark_worker.shutdown(wait=False, cancel_futures=True)
            self._close_clients()
        return self._stopped()

    def _ensure_topics(self, patience_s: float = 60.0) -> None:
        """The group's topics, asked again while the cluster cannot answer just now (a node
        killed, a controller being elected) rather than failing the start of a replica."""
        deadline = time.monotonic() + patience_s
        delay = 0.5
        while True:
            try:
                ensure_topics(self.settings, group=self.cfg.group, topic=self.cfg.topic)
                return
            except TopicError as exc:
                if not exc.transient or self.stopping or time.monotonic() + delay > deadline:
                    raise
                log.warning("topics: %s; asking again in %.1f s", exc, delay)
                self._sleep(delay)
                delay = min(delay * 2, 5.0)

    def _close_clients(self) -> None:
        assert self.consumer is not None
        try:
            self.consumer.close()  # leaves the group (the batch was drained above)
        except KafkaException as exc:
            log.warning("close: %s", exc)
        self.state.close()

    def _stopped(self) -> int:
        self.telemetry.emit(EventType.STOPPED, processed=self.processed,
                            dead_letters=self.dead_letters)
        self.telemetry.flush()
        return 0

    def _warm_up(self) -> float:
        """A fresh engine's first query takes seconds: pay it before joining the group.
        Returns the seconds it took, retries included."""
        start = time.monotonic()
        while not self.stopping and not self.spark.warm:
            try:
                self.spark.warm_up(typed=self.cfg.feed == "typed")
                break
            except Exception as exc:
                self._report_spark_error(exc)
                self._sleep(self._backoff)
                self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)
        return time.monotonic() - start

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < end:
            time.sleep(min(0.1, end - time.monotonic()))

    def _poll_once(self) -> None:
        assert self.consumer is not None
        now = time.monotonic()
        room = self.sizing.room(self.batch)
        wait = 0.2
        if not self.pauses.backing_off:
            wait = self.sizing.wait_s(self.batch, now, wait)
        msgs = self._take(room, wait)
        self.sizing.took(len(msgs), room)
        self._add(msgs)
        now = time.monotonic()
        if self.pauses.backing_off:
            if now >= self._retry_at:
                self._try_batch()
        elif self.sizing.due(self.batch, now):
            self._try_batch()
        if now >= self._hb_at:
            self._heartbeat(now)

    def _take(self, room: int, timeout: float) -> list[Any]:
        """Consume up to `room` records, and under a rate cap no more than it allows now.

        Out of allowance, the loop waits for it without consuming (a fraction of a second,
        see RateGate); for a cap too low for that it pauses the assignment and polls, so the
        member keeps answering rebalances. A record that still arrives is repaid from the
        next tokens.
        """
        assert self.consumer is not None
        now = time.monotonic()
        allowance = self.gate.allowance(now)
        if allowance is None:
            return self.consumer.consume(room, timeout)
        if allowance == 0 and self.gate.quiet(now):
            time.sleep(min(timeout, self.gate.until_open(now)))
            return []
        paused = allowance == 0
        self._throttle(paused)
        if paused:  # nothing comes back: this only polls
            room, timeout = 1, min(timeout, self.gate.until_open(now))
        else:
            room = min(room, allowance)
        msgs = self.consumer.consume(room, timeout)
        self.gate.took(time.monotonic(), len(msgs))
        return msgs

    def _throttle(self, over: bool) -> None:
        """Pause the assignment while a very low cap has no token, resume it when one comes
        (not while backing off)."""
        if over == self.pauses.throttled:
            return
        assigned = self._assigned_partitions()
        if over:
            self._flow(self.pauses.throttle(assigned), [], quiet=True)
        else:
            self._flow([], self.pauses.unthrottle(assigned), quiet=True)

    def _add(self, msgs: list[Any]) -> None:
        """Records into the current batch, but only of partitions this replica owns now.

        One consume() can return records fetched before a revocation it ran the callback
        for; added after the batch was split, they would be summarised here while the next
        owner processes them again from the committed offset (a chaos run under node kills
        counted one partition's batch twice, exactly-once)."""
        batch, ctx, owned = self.batch, self.context, self.rebalancer.owned
        for m in msgs:
            if m.error() is not None:
                log.warning("consume: %s", m.error())
                continue
            p, key = m.partition(), m.key()
            if p not in owned:
                continue  # given up since it was fetched: its next owner reads it again
            batch.add(p, m.offset(), key, m.value())
            if key and not ctx.is_known(p, key):
                stream = ctx.receive(p, key)
                self.telemetry.emit(EventType.STREAM_RECEIVED, stream=stream.stream_id,
                                    partition=p)

    def _drain_on_stop(self) -> None:
        """SIGTERM: finish the batch (a few tries if Spark hiccups), then commit."""
        for _ in range(3):
            if self.batch.empty or self._process_current():
                return
            time.sleep(0.5)

    # ---- batches ---------------------------------------------------------------------

    def _process_current(self) -> bool:
        """Process the current batch while new records collect in a fresh one.

        On failure the batch goes back in front of what arrived meanwhile, minus partitions
        this replica gave up in between (their next owner reads them again).
        """
        inflight, self.batch = self.batch, MicroBatch()
        if self._process(inflight):
            return True
        inflight.split(self._voided)
        inflight.absorb(self.batch)
        self.batch = inflight
        return False

    def _summarise(self, table: Any, typed: bool) -> Any:
        """Run the Spark query on the worker and keep polling here meanwhile.

        An eager rebalance waits for every member to rejoin, and a member rejoins only from
        poll(): blocking on Spark would stall the whole group by a batch. Records consumed
        meanwhile go into the next batch; rebalance callbacks run here, in this thread.
        """
        assert self.consumer is not None
        future = self._spark_worker.submit(self.spark.summarise, table,
                                           self.state.last_seqs(), typed=typed)
        while True:
            try:
                return future.result(timeout=0.05)
            except FutureTimeout:
                # not a backlog reading: a non-blocking consume returns what is queued
                self._add(self._take(self.sizing.room(self.batch), 0))

    def _try_batch(self) -> None:
        if self._process_current():
            if self.pauses.backing_off:
                self._backoff = 0.5
                self._flow([], self.pauses.recovered(self._assigned_partitions()))
                self.telemetry.emit(EventType.ERROR, error="batch persisted again; resumed",
                                    recovered=True)
        else:
            self._flow(self.pauses.failed(self._assigned_partitions()), [])
            self._retry_at = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)

    def _assigned_partitions(self) -> list[int]:
        assert self.consumer is not None
        return [tp.partition for tp in self.consumer.assignment() if tp.topic == self.cfg.topic]

    def _settle_flow(self, partitions: list[int]) -> None:
        """Right after `assign()`: paused while backing off, a stale pause lifted otherwise."""
        self._flow(*self.pauses.assigned(partitions))

    def _flow(self, pause: list[int], resume: list[int], quiet: bool = False) -> None:
        """Pause / resume partitions; `quiet` for a low rate cap's, about one a second."""
        assert self.consumer is not None
        say = log.debug if quiet else log.info
        if pause:
            self.consumer.pause([TopicPartition(self.cfg.topic, p) for p in pause])
            say("paused %s", pause)
        if resume:
            self.consumer.resume([TopicPartition(self.cfg.topic, p) for p in resume])
            say("resumed %s", resume)

    def _report_spark_error(self, exc: BaseException) -> None:
        self.spark_ok = False
        text = one_line(exc, EVENT_ERROR_CHARS)
        log.warning("Spark failed (%s); retrying in %.1fs", text, self._backoff)
        self.telemetry.emit(EventType.ERROR, error=f"Spark: {text}", retry_in_s=self._backoff)

    def _process(self, batch: MicroBatch) -> bool:
        """Summarise and persist `batch`; on success clear it and return True."""
        self._voided = set()
        if batch.empty:
            return True
        start = time.monotonic()
        if self.cfg.commit == BEFORE_PROCESSING and not self._commit_read(batch):
            return False
        dead = list(batch.dead)
        updated: dict[str, Summary] = {}
        typed = self.cfg.feed == "typed"
        if typed:
            table, rejected = batch.to_typed_arrow()
            dead += rejected
        else:
            table = batch.to_arrow()
        spark_s = 0.0
        if table.num_rows:
            try:
                result = self._summarise(table, typed)
                spark_s = result.seconds
            except Exception as exc:
                self._report_spark_error(exc)
                return False
            self.spark_ok = True
            now_ms = int(time.time() * 1000)
            for (p, sid), part in result.partials.items():
                if p in self._voided or p not in self.rebalancer.owned:
                    continue  # given up while Spark ran: the next owner processes these
                current = self.state.summaries.get(sid)
                summary = copy.deepcopy(current) if current else Summary(sid, p)
                summary.partition = p
                summary.merge_batch(part)
                summary.updated_ms = now_ms
                summary.replica = self.cfg.name
                updated[sid] = summary
            if result.bad:  # raw feed: Spark found them
                index = {(p, o): i for i, (p, o) in enumerate(
                    zip(batch.partitions, batch.offsets, strict=True))}
                for p, o, reason in result.bad:
                    i = index[(p, o)]
                    dead.append(DeadLetter(p, o, batch.keys[i], batch.values[i], reason))
        dead = [d for d in dead
                if d.partition not in self._voided and d.partition in self.rebalancer.owned]
        offsets = self._batch_offsets(batch) if self.cfg.commit in (AFTER_SUMMARY,
                                                                    TRANSACTIONAL) else []
        if not self._persist(updated, dead, offsets):
            return False
        self.state.summaries.update(updated)
        n = len(batch)
        self.processed += n
        self.batches += 1
        if dead:
            self.dead_letters += len(dead)
            reasons: dict[str, int] = {}
            for d in dead:
                reasons[d.reason] = reasons.get(d.reason, 0) + 1
            self.telemetry.emit(EventType.DEAD_LETTER, count=len(dead), total=self.dead_letters,
                                reasons=reasons)
        self.last_batch_ms = (time.monotonic() - start) * 1000.0
        if self.batches == 1:
            log.info("first batch: %d records summarised and committed in %.0f ms (Spark "
                     "%.0f ms), %.2f s after start", n, self.last_batch_ms, spark_s * 1000.0,
                     self._since_start())
        self.sizing.processed(n)
        batch.__init__()  # type: ignore[misc]
        return True

    def _batch_offsets(self, batch: MicroBatch) -> list[TopicPartition]:
        """What committing `batch` means: each owned partition's next offset after it."""
        return [TopicPartition(self.cfg.topic, p, o)
                for p, o in sorted(batch.next_offsets.items())
                if p in self.rebalancer.owned and p not in self._voided]

    def _commit_read(self, batch: MicroBatch) -> bool:
        """`before-processing`: the batch's offsets committed before Spark sees it, so a
        crash from here to its summaries loses it (at-most-once, the lesson). Once per batch:
        a retried batch is not committed again."""
        if batch.committed_early:
            return True
        assert self.consumer is not None
        offsets = self._batch_offsets(batch)
        try:
            if offsets:
                self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            log.warning("commit failed: %s", exc)
            self.telemetry.emit(EventType.ERROR,
                                error=f"commit failed: {one_line(exc, EVENT_ERROR_CHARS)}")
            return False
        batch.committed_early = True
        return True

    def _persist(self, updated: dict[str, Summary], dead: list[DeadLetter],
                 offsets: list[TopicPartition]) -> bool:
        assert self.producer is not None and self.consumer is not None
        changelog = self.state.changelog
        dlq = dead_letter_topic(self.cfg.group)
        eos = self.cfg.exactly_once
        try:
            if eos:
                self.producer.begin_transaction()
            errors: list[str] = []

            def on_delivery(err: Any, _msg: Any) -> None:
                if err is not None:
                    errors.append(str(err))

            for sid, s in updated.items():
                self.producer.produce(changelog, key=sid.encode(), partition=s.partition,
                                      value=orjson.dumps(s.to_dict()), on_delivery=on_delivery)
            for d in dead:
                self.producer.produce(dlq, key=d.key, value=d.publish_value(),
                                      headers=d.headers(self.cfg.topic, self.cfg.name),
                                      on_delivery=on_delivery)
            if eos:
                if offsets:
                    self.producer.send_offsets_to_transaction(
                        offsets, self.consumer.consumer_group_metadata(), 30)
                self.producer.commit_transaction(30)
            else:
                remaining = self.producer.flush(CHANGELOG_DELIVERY_MS / 1000.0 + 1.0)
                if remaining or errors:
                    raise KafkaException(f"changelog write not acknowledged: {errors[:1]}")
                if offsets:
                    self.consumer.commit(offsets=offsets, asynchronous=False)
            return True
        except KafkaException as exc:
            log.warning("persist failed: %s", exc)
            self.telemetry.emit(EventType.ERROR,
                                error=f"persist failed: {one_line(exc, EVENT_ERROR_CHARS)}")
            if eos:
                try:
                    self.producer.abort_transaction(30)
                except KafkaException as abort_exc:
                    log.warning("abort failed: %s", abort_exc)
            return False

    # ---- rebalance hooks ---------------------------------------------------------------

    def _assigned(self, partitions: list[int]) -> None:
        if partitions:
            start = time.monotonic()
            try:
                found = self.state.restore(partitions)
            except Exception as exc:
                # Processing without the restored state would corrupt the summaries; exiting
                # now is a crash the design already survives (nothing uncommitted is lost).
                log.error("cannot restore state of partitions %s: %s", partitions, exc)
                self.telemetry.emit(
                    EventType.ERROR, fatal=True,
                    error=f"state restore failed: {one_line(exc, EVENT_ERROR_CHARS)}")
                self.telemetry.flush()
                os._exit(3)
            restore_ms = round((time.monotonic() - start) * 1000.0, 1)
        else:
            found, restore_ms = 0, 0.0
        if partitions:
            self.sizing.prompt = True  # what the audience waits for: see WORTH_ROWS
        owned = sorted(self.rebalancer.owned | set(partitions))
        self.telemetry.emit(EventType.ASSIGNED, partitions=partitions, owned=owned,
                            restored=found, restore_ms=restore_ms,
                            incremental=self.cfg.choice.incremental)
        log.info("assigned %s (owned %s, %d summaries restored in %.0f ms)",
                 partitions, owned, found, restore_ms)

    def _revoked(self, partitions: list[int]) -> None:
        """Drop, don't process, the pending records of revoked partitions.

        They are neither merged into state nor committed, so the next owner reads them again
        from the committed offset: nothing lost, nothing counted twice. Running a Spark batch
        here instead would hold up the whole group's rebalance by a batch (seconds on a busy
        machine). A graceful stop still finishes its batch first (`_drain_on_stop`).
        """
        self.batch.split(partitions)
        self._forget(partitions, EventType.REVOKED)

    def _lost(self, partitions: list[int]) -> None:
        self.batch.split(partitions)  # not ours any more: never commit these
        self._forget(partitions, EventType.LOST)

    def _forget(self, partitions: list[int], kind: str) -> None:
        self._voided |= set(partitions)  # a batch in flight must not persist these
        streams = self.context.revoke_partitions(partitions)
        self.state.drop(partitions)
        owned = sorted(self.rebalancer.owned - set(partitions))
        self.telemetry.emit(kind, partitions=partitions, owned=owned)
        if streams:
            self.telemetry.emit(EventType.STREAMS_REVOKED, streams=[s.stream_id for s in streams],
                                partitions=partitions)
        log.info("%s %s (owned %s)", kind, partitions, owned)

    # ---- heartbeat -------------------------------------------------------------------

    def _heartbeat(self, now: float) -> None:
        elapsed = max(1e-6, now - self._hb_time)
        rate = (self.processed - self._hb_processed) / elapsed
        self._hb_processed, self._hb_time = self.processed, now
        # at its cap: it had more to take than the cap allowed since the last heartbeat
        throttled, self._hb_closures = self.gate.closures > self._hb_closures, self.gate.closures
        self._hb_at = now + HEARTBEAT_S
        owned = sorted(self.rebalancer.owned)
        streams = sorted(set(self.state.streams_in(owned))
                         | {s.stream_id for s in self.context.active_streams()})
        self.telemetry.emit(
            EventType.HEARTBEAT, processed=self.processed, rate=round(rate, 1),
            last_batch_ms=None if self.last_batch_ms is None else round(self.last_batch_ms, 1),
            partitions=owned, streams=streams, idle=not owned, dead_letters=self.dead_letters,
            batches=self.batches, pending=len(self.batch), spark_ok=self.spark_ok,
            backing_off=self.pauses.backing_off, throttled=throttled,
            max_rate=self.cfg.max_rate, static=self.cfg.static,
            protocol=self.cfg.choice.protocol, assignor=self.cfg.choice.assignor,
            exactly_once=self.cfg.exactly_once, commit=self.cfg.commit,
        )


def default_context() -> StreamingContext:
    ctx = StreamingContext()
    ctx.on_stream_received(log_received)
    ctx.on_streams_revoked(log_revoked)
    return ctx
