"""The Kafka reading layer on a real broker: every group type, offsets in batches, a JVM that
dies and comes back, secrets that stay off the command line."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from backend.contracts.overview import kafka_release, lacking
from backend.kafka.jars import KAFKA_VERSION
from backend.kafka.javaadmin.gateway import SOURCE, ReaderDown, ReaderError
from backend.kafka.javaadmin.reader import GroupOffsets, KafkaReader, kafka_error
from backend.kafka.settings import KafkaSettings
from backend.netutil import wait_until
from tests.observer.seed import seed_groups


def _topic(kafka: KafkaSettings, name: str, partitions: int = 3, records: int = 300) -> None:
    admin = AdminClient(kafka.client_config())
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    producer = Producer(kafka.client_config())
    for i in range(records):
        producer.produce(name, key=f"car-{i % 12:02d}", value=b"{}")
    producer.flush(30)


def _consume(consumer: Consumer | ShareConsumer, n: int, timeout: float = 60.0) -> int:
    got = 0
    deadline = time.monotonic() + timeout
    while got < n and time.monotonic() < deadline:
        answer = consumer.poll(0.5)
        # a share consumer's poll answers a batch of messages, a consumer's one message
        batch = [answer] if answer is None or hasattr(answer, "error") else list(answer)
        got += sum(1 for msg in batch if msg is not None and msg.error() is None)
    return got


@pytest.mark.broker
def test_every_group_type_is_listed_and_described(kafka: KafkaSettings, reader: KafkaReader,
                                                  unique: str) -> None:
    topic = f"read-{unique}"
    _topic(kafka, topic)
    classic = Consumer(kafka.client_config(**{
        "group.id": f"classic-{unique}", "auto.offset.reset": "earliest"}))
    modern = Consumer(kafka.client_config(**{
        "group.id": f"consumer-{unique}", "group.protocol": "consumer",
        "auto.offset.reset": "earliest"}))
    shared = [ShareConsumer(kafka.client_config(**{
        "group.id": f"share-{unique}", "client.id": f"share-member-{i}"})) for i in range(2)]
    try:
        for c in (classic, modern, *shared):
            c.subscribe([topic])
        assert _consume(classic, 10) == 10
        assert _consume(modern, 10) == 10
        classic.commit(asynchronous=False)
        modern.commit(asynchronous=False)
        # a share group starts at the log's end: records produced while its members poll
        producer = Producer(kafka.client_config())

        def both_members_in() -> bool:
            for i in range(20):
                producer.produce(topic, key=f"car-{i:02d}", value=b"{}")
            producer.flush(10)
            for s in shared:
                _consume(s, 1, timeout=0.5)
            d = reader.describe([f"share-{unique}"], "share")[f"share-{unique}"]
            return (not isinstance(d, str) and len(d.members) == 2
                    and all(m.assignment for m in d.members))

        wait_until(both_members_in, timeout=60,
                   what="both share consumers in the share group, each assigned partitions")

        types = {g.group: g.type for g in reader.list_groups()}
        assert types[f"classic-{unique}"] == "classic"
        assert types[f"consumer-{unique}"] == "consumer"
        assert types[f"share-{unique}"] == "share"

        described = reader.describe([f"classic-{unique}", f"consumer-{unique}"])
        assert described[f"classic-{unique}"].protocol == "classic"
        assert described[f"consumer-{unique}"].protocol == "consumer"
        assert described[f"consumer-{unique}"].epoch is not None
        share = reader.describe([f"share-{unique}"], "share")[f"share-{unique}"]
        assert share.protocol == "share"
        assert {m.client_id for m in share.members} == {"share-member-0", "share-member-1"}
        # a share group's partitions are shared: together the members cover all three
        covered = {tp for m in share.members for tp in m.assignment}
        assert covered == {(topic, p) for p in range(3)}

        committed = reader.committed([f"classic-{unique}", f"consumer-{unique}"])
        assert sum(committed[f"classic-{unique}"].values()) >= 10
        assert sum(committed[f"consumer-{unique}"].values()) >= 10
        share_offsets = reader.committed([f"share-{unique}"], "share")[f"share-{unique}"]
        assert isinstance(share_offsets, dict)
    finally:
        for c in (classic, modern, *shared):
            c.close()


@pytest.mark.broker
def test_the_pinned_kafka_says_its_release_and_lacks_no_group_type(reader: KafkaReader) -> None:
    features = reader.features()
    assert kafka_release(features) == ".".join(KAFKA_VERSION.split(".")[:2])
    assert lacking(features) == ()  # share and streams groups are on in the embedded node


def test_offsets_of_many_groups_in_one_call(kafka: KafkaSettings, reader: KafkaReader,
                                            unique: str) -> None:
    topic = f"many-{unique}"
    _topic(kafka, topic, partitions=2, records=20)
    groups = [f"many-{unique}-{i:03d}" for i in range(200)]
    seed_groups(kafka, {g: {(topic, i % 2): 1 + i % 7} for i, g in enumerate(groups)})
    calls = reader.calls
    committed = reader.committed(groups)
    assert reader.calls == calls + 1
    assert all(isinstance(committed[g], dict) and committed[g] for g in groups)


def test_an_unchanged_groups_offsets_are_not_sent_again(kafka: KafkaSettings,
                                                        reader: KafkaReader, unique: str) -> None:
    topic = f"held-{unique}"
    _topic(kafka, topic, partitions=2, records=20)
    groups = [f"held-{unique}-{i}" for i in range(3)]
    seed_groups(kafka, {g: {(topic, 0): 5, (topic, 1): 6 + i} for i, g in enumerate(groups)})
    first = reader.offsets(groups, known={})
    assert all(a.digest for a in first.values()), first  # digests asked for: each has one
    assert len({a.digest for a in first.values()}) == 3
    again = reader.offsets(groups, known=first)
    assert all(again[g] is first[g] for g in groups)  # nothing changed: the objects held
    seed_groups(kafka, {groups[0]: {(topic, 0): 9, (topic, 1): 6}})
    after = reader.offsets(groups, known=again)
    moved = after[groups[0]]
    assert not isinstance(moved, str) and moved is not first[groups[0]]
    assert moved.committed == {(topic, 0): 9, (topic, 1): 6}
    assert moved.digest not in ("", first[groups[0]].digest)
    assert after[groups[1]] is first[groups[1]] and after[groups[2]] is first[groups[2]]
    # a caller that holds nothing gets every answer whole, as without `known`
    assert reader.offsets(groups) == {g: GroupOffsets(a.committed, a.lag)
                                      for g, a in after.items()}


@pytest.mark.broker
def test_a_missing_group_and_partition_are_named_not_raised(kafka: KafkaSettings,
                                                            reader: KafkaReader,
                                                            unique: str) -> None:
    answer = reader.describe([f"nobody-{unique}"])[f"nobody-{unique}"]
    assert isinstance(answer, str) and answer.startswith("GROUP_ID_NOT_FOUND")
    metas, errors = reader.topics([f"absent-{unique}"])
    assert not metas and errors[f"absent-{unique}"].startswith("UNKNOWN_TOPIC_OR_PART")


@pytest.mark.broker
def test_the_jvm_killed_is_restarted_and_nothing_is_lost(kafka: KafkaSettings,
                                                         reader: KafkaReader) -> None:
    before = reader.cluster()
    starts = reader.gateway.starts
    pid = reader.gateway.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: reader.gateway.pid is None or not Path(f"/proc/{pid}").exists(),
               timeout=10, what="the reader's JVM to die")
    # the call that meets the dead JVM says so in the words a page shows; the next answers
    try:
        reader.cluster()
    except ReaderDown as exc:
        assert "reconnecting to the cluster" in str(exc)
    assert reader.cluster().brokers == before.brokers
    assert reader.gateway.starts == starts + 1
    assert reader.gateway.pid not in (None, pid)


@pytest.mark.broker
def test_no_secret_on_the_command_line_or_environment(broker_factory, tmp_path: Path) -> None:
    """The client's settings go over the child's standard input only."""
    secret = "s3cret-Passw0rd"
    settings = KafkaSettings(bootstrap="127.0.0.1:1", external=True, client_properties={
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": secret})
    r = KafkaReader(settings, timeout=2.0)
    try:
        # the JVM as a call starts it, looked at before any call: a call to nowhere may pass
        # its deadline on a loaded machine, and the gateway then kills the JVM
        r.gateway._ensure()
        pid = r.gateway.pid
        assert pid is not None
        assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        assert secret.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
        with pytest.raises(ReaderError):  # nothing listens on port 1
            r.list_groups()
        assert secret not in r.gateway.log_file.read_text(errors="replace")
    finally:
        r.close()


@pytest.mark.usefixtures("broker_factory")  # no broker is started: the marker (a JVM runs)
def test_a_cluster_that_cannot_be_reached_fails_the_listing_instead_of_listing_nothing() -> None:
    """Admin reports a failed broker lookup as an empty listing with one error; the reader
    turns that into a failure, so "no groups" never stands for "no cluster", whichever
    comes first: Admin's answer or the call's own deadline (6 s, before the node wait of a
    reader that has not answered yet, 10 s)."""
    r = KafkaReader(KafkaSettings(bootstrap="127.0.0.1:1"), timeout=6.0)
    try:
        with pytest.raises(ReaderError) as caught:
            r.listing()
        assert "Failed to find brokers" not in str(caught.value), caught.value
    finally:
        r.close()


def test_the_reader_calls_no_write_api() -> None:
    """Read-only means no write request can leave the process: the Java side calls only
    Admin's read methods (a DESCRIBE-only principal test covers the cluster's side)."""
    source = SOURCE.read_text()
    calls = set(re.findall(r"admin\.(\w+)\(", source))
    assert calls <= {"describeCluster", "describeFeatures", "listTopics", "describeTopics",
                     "listGroups", "describeClassicGroups",
                     "describeConsumerGroups", "describeShareGroups", "describeStreamsGroups",
                     "listConsumerGroupOffsets", "listShareGroupOffsets",
                     "listStreamsGroupOffsets", "listOffsets"}, calls


@pytest.mark.parametrize("line, expected", [
    ("GroupIdNotFoundException: Group g not found.", "GROUP_ID_NOT_FOUND: Group g not found."),
    ("GroupAuthorizationException: no", "GROUP_AUTHORIZATION_FAILED: no"),
    ("CoordinatorLoadInProgressException: wait", "COORDINATOR_LOAD_IN_PROGRESS: wait"),
    ("TimeoutException: late", "REQUEST_TIMED_OUT: late"),
    ("cannot read: plain text", "cannot read: plain text"),
])
def test_java_errors_keep_kafkas_names(line: str, expected: str) -> None:
    assert kafka_error(line) == expected


def test_py4j_s_root_logger_tracebacks_are_dropped_and_others_kept() -> None:
    """A JVM killed mid-call makes py4j log a traceback through the root logger; the caller
    already says "reconnecting to the cluster" in one line."""
    import logging

    import backend.kafka.javaadmin.gateway  # noqa: F401  installs the filter

    def record(name: str, path: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, path, 1, "Exception while sending command.",
                                 None, None)

    root = logging.getLogger()
    assert not root.filter(record("root", "/venv/site-packages/py4j/java_gateway.py"))
    assert root.filter(record("root", "/work/backend/cli.py"))
    assert root.filter(record("groupscope.kafka", "/venv/site-packages/py4j/x.py"))
