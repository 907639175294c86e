"""Lag you can trust, on the real broker: the observer's lag in messages and seconds where
a plain `end - committed` and a guessed age go wrong.

- a commit below the log start (records deleted past it) counts only what is left;
- transactions: the commit (or abort) marker after the last record leaves `end = committed
  + 1` for a caught-up read_committed group -- the observer says 0, 0 s and OK, not a lag
  of 1 that never moves; an open transaction is not called caught up;
- a compacted topic: the age comes from the first surviving record after the commit;
- a partition without a commit counts from the log start;
- every age is the broker's record timestamp: records are written with timestamps in the
  past, so a value from anything else (the observer's own clock) would be visibly wrong.

All fast but `test_a_caught_up_group_on_an_idle_topic_stays_ok_for_a_minute` (marked
`idle`: it watches an idle topic for IDLE_S).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, NewTopic

from backend.contracts import Snapshot
from backend.kafka.settings import KafkaSettings
from backend.netutil import wait_until
from backend.observer.observer import Observer
from backend.observer.sample import Sampler

POLL_S = 0.5
# more than the evaluator needs to call a lag that never moves STOP (3 points over 2 s)
HEALTH_WINDOW_POLLS = 7
# the idle watch: long enough for every window of the evaluator many times over (2 s) and for
# an age taken from the wrong clock to grow into a visible lag
IDLE_S = 60


def now_ms() -> int:
    return int(time.time() * 1000)


def make_topic(kafka: KafkaSettings, name: str, partitions: int,
               config: dict[str, str] | None = None) -> None:
    admin = AdminClient(kafka.client_config())
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)


def produce(kafka: KafkaSettings, topic: str, records: Sequence[tuple[int, str, int]],
            transactional_id: str | None = None, commit: bool | None = True) -> Producer:
    """(partition, key, timestamp ms) records; in one transaction if `transactional_id`:
    committed, aborted (commit=False) or left open (commit=None, the caller ends it)."""
    conf: dict[str, object] = {"linger.ms": 5}
    if transactional_id:
        conf["transactional.id"] = transactional_id
    producer = Producer(kafka.client_config(**conf))
    if transactional_id:
        producer.init_transactions(30)
        producer.begin_transaction()
    for partition, key, ts in records:
        producer.produce(topic, key=key.encode(), value=b"{}", partition=partition, timestamp=ts)
    producer.flush(30)
    if transactional_id and commit is True:
        producer.commit_transaction(30)
    elif transactional_id and commit is False:
        producer.abort_transaction(30)
    return producer


def commit_offsets(kafka: KafkaSettings, group: str, topic: str,
                   offsets: dict[int, int]) -> None:
    """Commit for a group that has no members, as a consumer that never subscribes (the
    way a tool resets offsets; it finds the coordinator, which the admin call does not
    retry)."""
    consumer = Consumer(kafka.client_config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        done = consumer.commit(offsets=[KafkaTP(topic, p, off) for p, off in offsets.items()],
                               asynchronous=False)
        assert all(tp.error is None for tp in done), done
    finally:
        consumer.close()


def delete_before(kafka: KafkaSettings, topic: str, offsets: dict[int, int]) -> None:
    admin = AdminClient(kafka.client_config())
    futs = admin.delete_records([KafkaTP(topic, p, off) for p, off in offsets.items()])
    for fut in futs.values():
        fut.result(30)


def consume_all_and_commit(kafka: KafkaSettings, group: str, topic: str,
                           partitions: int) -> dict[int, int]:
    """A read_committed member of `group` reads every partition to its end, then commits
    what it processed: the offset after the last record it was given, as the replicas (and
    most stream processors) do. After a transaction that offset is the commit marker's.
    Returns the committed offsets."""
    consumer = Consumer(kafka.client_config(**{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed", "enable.partition.eof": True}))
    try:
        consumer.subscribe([topic])
        at_end: set[int] = set()
        processed: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"only partitions {at_end} read to the end"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
            else:
                processed[msg.partition()] = msg.offset() + 1
        done = consumer.commit(offsets=[KafkaTP(topic, p, off) for p, off in processed.items()],
                               asynchronous=False)
        assert all(tp.error is None for tp in done), done
        return {tp.partition: tp.offset for tp in done}
    finally:
        consumer.close()


@pytest.fixture
def observe(kafka: KafkaSettings) -> Iterator[Callable[[str, str], Observer]]:
    """observe(group, topic): a started Observer (polling every 0.5 s, no key sampling, no
    event tail), stopped at teardown."""
    made: list[Observer] = []

    def start(group: str, topic: str) -> Observer:
        obs = Observer(kafka, group, topic=topic, interval=POLL_S, sample_every=3600,
                       tail_events=False, read_generation=False)
        made.append(obs)
        return obs.start()

    try:
        yield start
    finally:
        for obs in made:
            obs.stop()


def snapshots(obs: Observer, since_ms: int, count: int, timeout: float = 30) -> list[Snapshot]:
    """The first `count` error-free snapshots taken at or after `since_ms`."""
    def enough() -> list[Snapshot] | None:
        snaps = [s for s in obs.history(since_ms) if s.error is None and s.taken_ms >= since_ms]
        return snaps[:count] if len(snaps) >= count else None

    return wait_until(enough, timeout=timeout, interval=0.1, what=f"{count} snapshots")


def settled(obs: Observer, ends: Sequence[int], timeout: float = 30) -> int:
    """When the observer first saw these log ends: a transaction's markers are written to
    the partitions after commit/abort_transaction returns, so a test waits for them."""
    def seen() -> int | None:
        snap = obs.latest()
        ok = snap is not None and [p.end for p in snap.partitions] == list(ends)
        return snap.taken_ms if ok else None

    return wait_until(seen, timeout=timeout, interval=0.1, what=f"log ends {list(ends)}")


def age_s(snap: Snapshot, record_ts_ms: int) -> float:
    """How old a record written at `record_ts_ms` was when the snapshot was taken."""
    return pytest.approx((snap.taken_ms - record_ts_ms) / 1000, abs=0.002)


def assert_caught_up(snaps: Sequence[Snapshot]) -> None:
    for snap in snaps:
        assert snap.health == "OK", (snap.taken_ms, [p.health for p in snap.partitions])
        assert snap.total_lag == 0 and snap.max_lag_seconds == 0.0
        for p in snap.partitions:
            assert (p.lag_messages, p.lag_seconds, p.health) == (0, 0.0, "OK"), p


# ---- 1. a commit below the log start ---------------------------------------------------


@pytest.mark.timeout(90)
def test_a_commit_below_the_log_start_counts_only_what_is_left(kafka, unique, observe):
    topic, group = f"lag-deleted-{unique}", f"lag-deleted-g-{unique}"
    make_topic(kafka, topic, 1)
    base = now_ms() - 200_000  # record i was written at base + i s
    produce(kafka, topic, [(0, f"k{i}", base + i * 1000) for i in range(100)])
    commit_offsets(kafka, group, topic, {0: 20})
    delete_before(kafka, topic, {0: 50})  # records 20..49, the group's next ones, are gone

    snap = snapshots(observe(group, topic), now_ms(), 2)[-1]
    p = snap.partitions[0]
    assert (p.committed, p.end, p.lag_messages) == (20, 100, 50)
    # the oldest record left is offset 50, written at base + 50 s: 150 s old, not 180 s
    assert p.lag_seconds_exact
    assert p.lag_seconds == age_s(snap, base + 50_000)


# ---- 2. transactions -------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_transaction_markers_leave_no_stuck_lag(kafka, unique, observe):
    topic, group = f"lag-txn-{unique}", f"lag-txn-g-{unique}"
    make_topic(kafka, topic, 2)
    t0 = now_ms()
    produce(kafka, topic, [(p, f"k{i}", t0) for p in range(2) for i in range(10)],
            transactional_id=f"txn-{unique}")
    committed = consume_all_and_commit(kafka, group, topic, 2)
    assert committed == {0: 10, 1: 10}  # after the last data record, before the marker

    obs = observe(group, topic)
    begun = now_ms()
    snaps = snapshots(obs, begun, HEALTH_WINDOW_POLLS)
    # the precondition of the whole test: each log ends with the commit marker at 10
    assert all((p.committed, p.end) == (10, 11) for p in snaps[-1].partitions)
    assert_caught_up(snaps)
    # a drained partition costs nothing per poll: its answer is cached
    reads = obs._sampler_client().reads
    snapshots(obs, now_ms(), 3)
    assert obs._sampler_client().reads == reads

    # an aborted transaction adds 5 records and an abort marker per partition: still nothing
    # for a read_committed group to process
    produce(kafka, topic, [(p, f"a{i}", now_ms()) for p in range(2) for i in range(5)],
            transactional_id=f"txn-{unique}", commit=False)
    snaps = snapshots(obs, settled(obs, [17, 17]), HEALTH_WINDOW_POLLS)
    assert all(p.committed == 10 for p in snaps[-1].partitions)
    assert_caught_up(snaps)

    # then real data behind the markers and aborted records: its own age, its own count
    written = now_ms() - 30_000
    produce(kafka, topic, [(p, f"d{i}", written) for p in range(2) for i in range(3)],
            transactional_id=f"txn-{unique}")
    snap = snapshots(obs, settled(obs, [21, 21]), 1)[0]
    for p in snap.partitions:
        assert (p.committed, p.end, p.lag_messages) == (10, 21, 11)  # markers still counted
        assert p.lag_seconds_exact and p.lag_seconds == age_s(snap, written)


@pytest.mark.timeout(90)
def test_an_open_transaction_is_not_called_caught_up(kafka, unique, observe):
    topic, group = f"lag-open-{unique}", f"lag-open-g-{unique}"
    make_topic(kafka, topic, 1)
    produce(kafka, topic, [(0, "k", now_ms())], transactional_id=f"open-{unique}")
    assert consume_all_and_commit(kafka, group, topic, 1) == {0: 1}
    obs = observe(group, topic)
    assert_caught_up(snapshots(obs, now_ms(), 2))

    # records of a transaction still open may become data: not 0, age not known yet
    producer = produce(kafka, topic, [(0, f"o{i}", now_ms()) for i in range(4)],
                       transactional_id=f"open-{unique}", commit=None)
    try:
        p = snapshots(obs, now_ms(), 2)[-1].partitions[0]
        assert (p.committed, p.end, p.lag_messages, p.lag_seconds) == (1, 6, 5, None)
    finally:
        producer.abort_transaction(30)
    # aborted: nothing was ever there to process
    p = snapshots(obs, settled(obs, [7]), 1)[0].partitions[0]
    assert (p.committed, p.end, p.lag_messages, p.lag_seconds) == (1, 7, 0, 0.0)


# ---- 3. compaction -----------------------------------------------------------------------


def first_offsets(kafka: KafkaSettings, topic: str, n: int) -> list[int]:
    """The offsets of the first `n` records still in partition 0."""
    consumer = Consumer(kafka.client_config(**{
        "group.id": "lag-truth-reader", "enable.auto.commit": False,
        "enable.partition.eof": True}))
    try:
        consumer.assign([KafkaTP(topic, 0, 0)])
        seen: list[int] = []
        deadline = time.monotonic() + 10
        while len(seen) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                break
            seen.append(msg.offset())
        return seen
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_a_compacted_away_commit_is_aged_from_the_first_surviving_record(kafka, unique,
                                                                         observe):
    topic, group = f"lag-compact-{unique}", f"lag-compact-g-{unique}"
    make_topic(kafka, topic, 1, {
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "100"})
    base = now_ms() - 200_000
    # five keys, each written 20 times: after compaction only offsets 95..99 survive
    produce(kafka, topic, [(0, f"k{i % 5}", base + i * 1000) for i in range(100)])
    # a later record rolls the segment (its age is past segment.ms), so the cleaner may run
    produce(kafka, topic, [(0, "roll", now_ms())])
    started = time.monotonic()
    survivors = wait_until(lambda: (o := first_offsets(kafka, topic, 5)) and o[0] > 0 and o,
                           timeout=60, interval=1.0, what="the log cleaner to compact")
    assert survivors == [95, 96, 97, 98, 99], survivors
    compaction_s = time.monotonic() - started

    commit_offsets(kafka, group, topic, {0: 10})  # offset 10 was compacted away
    snap = snapshots(observe(group, topic), now_ms(), 2)[-1]
    p = snap.partitions[0]
    assert (p.committed, p.end, p.lag_messages) == (10, 101, 91)
    # the first record at/after 10 is 95, written at base + 95 s: 105 s old, not 190 s
    assert p.lag_seconds_exact
    assert p.lag_seconds == age_s(snap, base + 95_000), compaction_s


# ---- 4. no commit ------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_a_partition_without_a_commit_counts_from_the_log_start(kafka, unique, observe):
    topic, group = f"lag-nocommit-{unique}", f"lag-nocommit-g-{unique}"
    make_topic(kafka, topic, 2)
    base = now_ms() - 100_000
    produce(kafka, topic, [(p, f"k{i}", base + i * 1000) for p in range(2) for i in range(40)])
    commit_offsets(kafka, group, topic, {0: 40})  # partition 1: never committed
    delete_before(kafka, topic, {1: 10})

    snap = snapshots(observe(group, topic), now_ms(), 2)[-1]
    parts = snap.partitions
    assert (parts[0].lag_messages, parts[0].lag_seconds) == (0, 0.0)
    p = parts[1]
    assert (p.committed, p.end, p.lag_messages) == (None, 40, 30)
    # the oldest record in the log, offset 10, was written at base + 10 s
    assert p.lag_seconds_exact and p.lag_seconds == age_s(snap, base + 10_000)


# ---- the reader the overview shares ------------------------------------------------------


@pytest.mark.timeout(90)
def test_record_times_answers_many_topics_at_once_without_a_group(kafka, unique):
    plain, txn = f"rt-plain-{unique}", f"rt-txn-{unique}"
    make_topic(kafka, plain, 2)
    make_topic(kafka, txn, 1)
    base = now_ms() - 60_000
    produce(kafka, plain, [(p, f"k{i}", base + p * 10_000 + i) for p in range(2)
                           for i in range(5)])
    produce(kafka, txn, [(0, "k", base)], transactional_id=f"rt-{unique}")  # data 0, marker 1
    produce(kafka, txn, [(0, "x", base)], transactional_id=f"rt-{unique}", commit=False)

    sampler = Sampler(kafka)  # no group: one shared reader per cluster
    try:
        wanted = {(plain, 0): (2, 5), (plain, 1): (0, 5), (txn, 0): (1, 4)}
        got = sampler.record_times(wanted, budget_s=10.0)
        assert got == {(plain, 0): base + 2, (plain, 1): base + 10_000, (txn, 0): None}
        # a partition that does not exist is not learnt, and is no error
        assert sampler.record_times({(txn, 1): (0, 1)}, budget_s=0.3) == {}
        reads = sampler.reads
        # answered from the cache; a range known empty needs no read either
        assert sampler.record_times({(plain, 0): (2, 5), (txn, 0): (1, 3)}) == {
            (plain, 0): base + 2, (txn, 0): None}
        assert sampler.reads == reads
        # from 0 the first data record is offset 0 itself
        assert sampler.record_times({(txn, 0): (0, 4)}, budget_s=5.0) == {(txn, 0): base}
    finally:
        sampler.close()


def test_many_starts_on_one_partition_are_answered_in_one_pass_far_ones_by_a_seek(
        kafka, unique):
    topic = f"rt-many-{unique}"
    make_topic(kafka, topic, 1)
    base = now_ms() - 600_000
    n = 6_000
    produce(kafka, topic, [(0, f"k{i}", base + i) for i in range(n)])
    sampler = Sampler(kafka)
    try:
        starts = (10, 11, 500, 5_900)  # 5 900 is past SEEK_GAP from 500: reached by a seek
        got = sampler.record_times_many({(topic, 0): (starts, n)}, budget_s=10.0)
        assert got == {((topic, 0), s): base + s for s in starts}
        assert sampler.reads == 1
        # the cache answers without a budget; an unknown start without one is not learnt
        assert sampler.record_times_many({(topic, 0): ((500, 7), n)}, budget_s=0.0) == {
            ((topic, 0), 500): base + 500}
    finally:
        sampler.close()


# ---- 6. an idle topic, for a minute -------------------------------------------------------


@pytest.mark.idle  # a minute of polls and nothing else: the third lane
@pytest.mark.timeout(300)
def test_a_caught_up_group_on_an_idle_topic_stays_ok_for_a_minute(kafka, unique, observe):
    """The slow one: IDLE_S of polls with nothing new. A caught-up group's lag is 0 messages
    and 0 s in every snapshot and its health OK, on a transactional topic whose logs end
    with a commit marker (end = committed + 1) and on a plain one."""
    topic, group = f"lag-idle-{unique}", f"lag-idle-g-{unique}"
    make_topic(kafka, topic, 3)
    produce(kafka, topic, [(p, f"k{i}", now_ms()) for p in range(2) for i in range(10)],
            transactional_id=f"idle-{unique}")
    produce(kafka, topic, [(2, f"k{i}", now_ms()) for i in range(10)])
    assert consume_all_and_commit(kafka, group, topic, 3) == {0: 10, 1: 10, 2: 10}

    obs = observe(group, topic)
    begun = now_ms()
    wait_until(lambda: (h := obs.history(begun)) and h[-1].taken_ms - begun >= IDLE_S * 1000,
               timeout=IDLE_S + 80, interval=1.0, what="a minute of snapshots")
    snaps = [s for s in obs.history(begun) if s.taken_ms >= begun]
    assert len(snaps) >= IDLE_S / POLL_S * 0.8  # the observer kept polling
    assert all(s.error is None for s in snaps)
    assert [(p.committed, p.end) for p in snaps[-1].partitions] == [(10, 11), (10, 11),
                                                                   (10, 10)]
    assert_caught_up(snaps)
