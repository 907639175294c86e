"""The Kafka reader's class-data archive (backend/classdata.py): its JVM maps Kafka's client
classes instead of reading and verifying them from their jars.

Every page waits for a fresh reader JVM: the Groups overview's first screen, and the
"reconnecting to the cluster" after one died. Much of that start is class loading: the Admin
client, its request and response messages, py4j's gateway.

Where the archive lives is decided in gateway.py (`class_archive_path`), beside the class
path it is only valid for, and re-exported here; this module, which starts gateways of its
own, is what gateway.py must not import. The training gateway makes every call the reader
makes, through a KafkaReader, on a broker where it has first made what those calls describe:
a topic with records, a classic and a consumer (KIP-848) group with a member and committed
offsets, a share group with a member; a streams group needs a Streams application, so its
calls meet an unknown group. It is then stopped through its standard input, as its parent's
exit would, and writes the archive. The check is a second gateway that maps the file and
answers `cluster`.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from backend import classdata as base
from backend.kafka.javaadmin.gateway import (
    ARCHIVE_NAME,
    AdminGateway,
    ReaderDown,
    ReaderError,
    cached_class_archive,
    class_archive_path,
)
from backend.kafka.javaadmin.reader import KafkaReader
from backend.kafka.settings import KafkaSettings

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer, ShareConsumer

NAME = ARCHIVE_NAME
WHAT = "the Kafka reader"
# how long the training waits for its groups' members to have records, each; a member
# that is late still leaves its group to describe
JOIN_S = 30.0


def archive_path() -> Path | None:
    """Where the archive for this Java and the reader's class path lives (None: no java, or
    no jar; compiles the reader's class first if needed)."""
    return class_archive_path()


def cached_archive() -> Path | None:
    """The archive the reader's JVM starts on, if it has been built."""
    return cached_class_archive()


def build(settings: KafkaSettings, progress: Callable[[str], None] = print) -> Path:
    """Build this Java's and class path's archive unless it exists, training against the
    broker of `settings` (it gets a topic and three groups); returns its path."""

    def launch(_work: Path, archive: Path | None, record: Path | None) -> AdminGateway:
        gateway = AdminGateway(settings, client_id="groupscope-reader-training",
                               class_archive=archive, record_classes=record)
        try:
            gateway.call("cluster")  # started, and the Admin connected
        except BaseException:
            gateway.close()
            raise
        return gateway

    def trained(service: base.JvmService) -> None:
        assert isinstance(service, AdminGateway)  # what launch started
        train(service, settings)

    return base.build(NAME, archive_path(), launch, trained, WHAT, progress)


def train(gateway: AdminGateway, settings: KafkaSettings) -> None:
    """Have the reader's JVM load what serving a page loads: each of KafkaReader's calls, on
    groups of each type that have members and offsets. A call the broker refuses still
    records its classes; a JVM that dies fails the build."""
    from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"groupscope-reader-training-{secrets.token_hex(4)}"
    groups = {kind: f"{topic}-{kind}" for kind in ("classic", "consumer", "share")}
    admin = AdminClient(settings.client_config())
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer(settings.client_config())
    for i in range(20):
        producer.produce(topic, key=b"car-%d" % (i % 4), value=b"{}")
    producer.flush(30)
    consumers = [
        Consumer(settings.client_config(**{
            "group.id": groups["classic"], "auto.offset.reset": "earliest",
            "enable.auto.commit": False})),
        Consumer(settings.client_config(**{
            "group.id": groups["consumer"], "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False})),
    ]
    # log_level 3: errors only, not its warning that share consumers are a preview
    share = ShareConsumer(settings.client_config(**{"group.id": groups["share"], "log_level": 3}))
    try:
        for consumer in consumers:
            # a broker without the group type (KIP-848, share groups: an older Kafka) leaves
            # that group out; the reader's calls about it still load their classes
            with contextlib.suppress(KafkaException):
                consumer.subscribe([topic])
                _first_records(consumer)
                consumer.commit(asynchronous=False)
        with contextlib.suppress(KafkaException):
            share.subscribe([topic])
            _share_member(share, producer, topic)
        _read_all(KafkaReader(settings, gateway=gateway), topic, groups)
    finally:
        for consumer in consumers:
            consumer.close()
        share.close()


def _first_records(consumer: Consumer) -> None:
    """Until the member has joined and has records (so it has offsets to commit)."""
    deadline = time.monotonic() + JOIN_S
    while time.monotonic() < deadline:
        if any(m.error() is None for m in consumer.consume(10, 0.5)):
            return


def _share_member(share: ShareConsumer, producer: Producer, topic: str) -> None:
    """A share group starts at the log's end: records are produced while its member polls,
    until it has one."""
    deadline = time.monotonic() + JOIN_S
    while time.monotonic() < deadline:
        producer.produce(topic, key=b"car-0", value=b"{}")
        producer.flush(5)
        if any(m.error() is None for m in share.poll(0.5)):
            return


def _read_all(reader: KafkaReader, topic: str, groups: dict[str, str]) -> None:
    """Each of the reader's calls, as a page and the observer make them. The reader is left
    unclosed: closing it kills the JVM, which then writes no archive (build stops it)."""
    missing = f"{topic}-streams"  # no streams app here: its calls answer an unknown group
    kinds = ("classic", "consumer", "share", "streams")
    ids = {kind: [groups[kind], missing] if kind in groups else [missing] for kind in kinds}
    calls: list[Callable[[], object]] = [
        reader.cluster, reader.topics, lambda: reader.topics([topic]), reader.listing,
        *[lambda kind=kind: reader.describe(ids[kind], kind) for kind in kinds],
        *[lambda kind=kind: reader.committed(ids[kind], kind) for kind in kinds[1:]],
        lambda: reader.log_offsets([(topic, 0), (topic, 1)]),
        lambda: reader.list_offsets({(topic, 0): "earliest", (topic, 1): "latest"}),
        lambda: reader.list_offsets({(topic, 0): str(int(time.time() * 1000) - 60_000)}),
    ]
    for call in calls:
        try:
            call()
        except ReaderDown:
            raise
        except ReaderError:
            pass  # refused (an old broker, an ACL): its classes are loaded all the same
