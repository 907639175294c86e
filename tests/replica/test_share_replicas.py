"""Share-group replicas (`groupscope replica --share`) on the real broker and Spark.

More replicas than partitions all work, and the deltas they write fold into summaries that
prove nothing was lost; records a stuck sharer held come back late, out of order. A replica
SIGKILLed while it holds records it has not summarised (Spark cut off from it by a proxy, so
the batch stays in flight as long as the test needs): the broker hands those records to
another member after the lock time (5 s on the embedded broker) with delivery count 2, and
the summaries still say lost 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from backend.contracts import deltas_topic, events_topic
from backend.contracts.queue_summary import QueueDelta, QueueSummary, fold_deltas
from backend.kafka.settings import KafkaSettings
from backend.kafka.topics import TopicSpec, ensure
from backend.netutil import free_port
from tests.replica.harness import ContractProducer, CuttableProxy, EventLog, ReplicaFleet

PARTITIONS = 2
STREAMS = 6


def read_deltas(settings: KafkaSettings, group: str) -> list[QueueDelta]:
    """Every delta the group wrote, in the topic's order."""
    import orjson

    consumer = Consumer(settings.client_config(**{
        "group.id": f"test-deltas-{time.time_ns()}", "enable.auto.commit": False}))
    try:
        tp = TopicPartition(deltas_topic(group), 0)
        _, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([TopicPartition(tp.topic, 0, OFFSET_BEGINNING)])
        out: list[QueueDelta] = []
        deadline = time.monotonic() + 20
        while len(out) < high and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    out.append(QueueDelta.from_dict(orjson.loads(m.value())))
        assert len(out) >= high, f"read {len(out)} of {high} deltas"
        return out
    finally:
        consumer.close()


def proven(settings: KafkaSettings, group: str, produced: dict[str, int]
           ) -> dict[str, QueueSummary] | None:
    """The folded summaries once every produced seq of every stream is in them."""
    summaries = fold_deltas(read_deltas(settings, group))
    done = set(summaries) == set(produced) and all(
        summaries[s].distinct == n for s, n in produced.items())
    return summaries if done else None


@pytest.fixture
def share(kafka, spark_remote, unique, artifacts_dir) -> Iterator[tuple[ReplicaFleet, EventLog]]:
    group, topic = f"q-{unique}", f"queue-{unique}"
    ensure(kafka, [TopicSpec(topic, PARTITIONS, None)])
    ensure(kafka, [TopicSpec(events_topic(group), 1, None)])
    log_dir = artifacts_dir / f"share-{unique}"
    log_dir.mkdir(parents=True, exist_ok=True)
    fleet = ReplicaFleet(kafka, spark_remote, group, topic, log_dir)
    events = EventLog(kafka, events_topic(group))
    try:
        yield fleet, events
    finally:
        fleet.close()
        events.close()


def _processed(events: EventLog, name: str) -> int:
    beats = events.latest_heartbeats([name])
    return int(beats[name]["processed"]) if name in beats else 0


@pytest.mark.timeout(420)
def test_share_replicas_beyond_the_partitions_all_work_out_of_order_and_lose_nothing(
        kafka, spark_remote, share):
    """Three sharers on two partitions all work. Then alice's Spark is cut off while she
    works: the batch she holds fails and goes back (released, or taken after the lock time)
    to bruno or chen, who have meanwhile summarised later records of the same cars, so those
    cars' records arrive out of order, by construction rather than by the broker's hand-out
    order. Alice takes nothing more while her Spark is down."""
    fleet, events = share
    names = ("alice", "bruno", "chen")
    target = urlparse(spark_remote.replace("sc://", "http://"))
    proxy = CuttableProxy(str(target.hostname), int(target.port or 0))
    fleet.spark_remote = f"sc://127.0.0.1:{proxy.port}"
    fleet.start("alice", "--share")
    fleet.spark_remote = spark_remote
    for name in names[1:]:
        fleet.start(name, "--share")
    producer = ContractProducer(kafka, fleet.topic, streams=STREAMS, rate=300).start()
    try:
        fleet.wait(lambda: all(_processed(events, n) > 0 for n in names), 120,
                   "three share replicas on two partitions all processing")
        proxy.cut()
        fleet.wait(lambda: "records released" in fleet.output("alice"), 90,
                   "alice giving back a batch she cannot summarise")
        fleet.wait(lambda: [e for e in events.of("redelivered") if e["replica"] in names[1:]],
                   90, "alice's records handed to another")
        fleet.wait(lambda: "Spark still unreachable" in fleet.output("alice"), 60,
                   "alice finding her Spark still down")
        taken = fleet.output("alice").count("acquired")
    finally:
        produced = producer.stop()
        proxy.close()
    # 60 s ran out at load 29 with the two sharers still catching up
    summaries = fleet.wait(lambda: proven(kafka, fleet.group, produced), 150,
                           "every produced record summarised")
    for s in summaries.values():
        assert s.lost == 0, s
        assert s.duplicates <= s.redelivered, s
    assert fleet.output("alice").count("acquired") == taken  # nothing while her Spark is down
    workers = {r for s in summaries.values() for r, n in s.replicas.items() if n > 0}
    assert workers == set(names)
    assert sum(s.out_of_order for s in summaries.values()) > 0
    # the sharers' heartbeats say how fast they accept and how many records they hold
    beats = [e for e in events.of("heartbeat") if e["replica"] in names[1:]]
    assert any(float(e["rate"]) > 0 and float(e["in_flight"]) > 0 for e in beats)


@pytest.mark.timeout(180)
def test_a_share_replica_whose_spark_is_down_gives_its_batch_back_and_takes_no_more(
        kafka, share):
    """A sharer that cannot reach Spark releases the batch it took and then takes nothing
    until Spark answers. Taking and releasing again and again spent the records' deliveries:
    the broker hands the lowest released offsets out first, so the same records came back
    to it, and at the delivery limit (5) a record is archived, summarised by no one."""
    fleet, _ = share
    fleet.spark_remote = f"sc://127.0.0.1:{free_port()}"  # nothing listens there
    fleet.start("alice", "--share")
    producer = ContractProducer(kafka, fleet.topic, streams=STREAMS, rate=300).start()
    try:
        fleet.wait(lambda: fleet.output("alice").count("Spark still unreachable") >= 3, 90,
                   "alice's Spark found down three times after her first batch")
    finally:
        producer.stop()
    log = fleet.output("alice")
    assert log.count("acquired") == 1, log[-3000:]
    assert log.count("records released") == 1, log[-3000:]


@pytest.mark.timeout(240)
def test_a_killed_share_replicas_records_come_back_to_another_and_nothing_is_lost(
        kafka, spark_remote, share):
    fleet, events = share
    target = urlparse(spark_remote.replace("sc://", "http://"))
    proxy = CuttableProxy(str(target.hostname), int(target.port or 0))
    producer = ContractProducer(kafka, fleet.topic, streams=STREAMS)
    try:
        fleet.spark_remote = f"sc://127.0.0.1:{proxy.port}"
        fleet.start("alice", "--share")
        for _ in range(20):
            producer.produce_one_round()
        first = producer.stop()
        fleet.wait(lambda: proven(kafka, fleet.group, first), 120, "the first round summarised")

        taken = fleet.output("alice").count("acquired")
        proxy.cut()  # what alice takes next cannot be summarised
        producer = ContractProducer(kafka, fleet.topic, streams=STREAMS)
        producer.next_seq = dict(first)
        for _ in range(20):
            producer.produce_one_round()
        produced = producer.stop()
        fleet.wait(lambda: fleet.output("alice").count("acquired") > taken, 60,
                   "alice holding records of the second round")
        fleet.kill("alice")

        fleet.spark_remote = spark_remote
        fleet.start("bruno", "--share")
        summaries = fleet.wait(lambda: proven(kafka, fleet.group, produced), 120,
                               "the second round summarised by bruno")
    finally:
        proxy.close()
    redelivered = sum(s.redelivered for s in summaries.values())
    assert redelivered > 0
    for s in summaries.values():
        assert s.lost == 0, s
        assert s.duplicates <= s.redelivered, s
    assert sum(s.replicas.get("bruno", 0) for s in summaries.values()) >= redelivered
    assert events.of("redelivered", replica="bruno")


@pytest.mark.parametrize("extra", [("--static",), ("--commit", "auto"), ("--protocol", "classic"),
                                   ("--max-rate", "5")])
def test_a_consumer_group_option_with_share_is_one_line_naming_it(extra):
    import subprocess
    import sys

    from tests.replica.harness import REPO

    done = subprocess.run([sys.executable, "-m", "backend.cli", "replica", "--share", "--id",
                           "x", "--bootstrap", "127.0.0.1:1", *extra], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and extra[0] in lines[0] and "--share" in lines[0], done.stderr
