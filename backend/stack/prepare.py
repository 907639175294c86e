"""What a first `make demo` or `make test` prepares once, so later starts are offline and fast.

Three things: Kafka's jars by Maven coordinates (backend/kafka/jars.py), in the user's cache
and shared by every clone, then the Kafka reader's compiled class and the class-data archives
(backend/classdata.py) of Kafka's nodes, of the Kafka reader's JVM and of Spark's engine, in
this environment (their jars' paths are in them), each recorded while a training JVM does
what the stack will ask of it.
The training of the nodes and the engine lives here rather than in the broker and engine
packages because it is what their users ask of them (the stack's topics and transactions,
the replica's queries), and neither runtime imports its users. The reader is a client: its
training is its own (backend/kafka/javaadmin/classdata.py), it only needs a broker to train against.

An archive that cannot be built is a warning, not a failure: the JVM starts without it,
only slower.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from backend.broker import classdata as kafka_classdata
from backend.broker.embedded import EmbeddedBroker
from backend.engine import classdata as spark_classdata
from backend.errors import one_line
from backend.kafka.jars import kafka_classpath
from backend.kafka.javaadmin import classdata as reader_classdata
from backend.kafka.javaadmin.gateway import compiled_classes
from backend.kafka.topics import ensure_topics
from backend.netutil import free_port
from backend.offsets.writer import compiled_writer
from backend.replica.spark_summary import SparkSummariser
from backend.spark.session import check_engine

if TYPE_CHECKING:
    from backend.kafka.settings import KafkaSettings


def train_broker(settings: KafkaSettings) -> None:
    """What the stack asks of a fresh node: its topics (input, compacted changelog, events,
    dead letters), a consumer group that joins and commits, and a transaction with offsets,
    as an exactly-once replica commits its batch."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    layout = ensure_topics(settings, group="training", topic="training", partitions=2)
    producer = Producer(settings.client_config(**{"transactional.id": "training"}))
    producer.init_transactions(30)
    consumer = Consumer(settings.client_config(**{
        "group.id": "training", "auto.offset.reset": "earliest",
        "enable.auto.commit": False}))
    try:
        producer.begin_transaction()
        for i in range(100):
            producer.produce(layout.input.name, key=b"car-%d" % (i % 4), value=b"%d" % i)
        producer.commit_transaction(30)
        consumer.subscribe([layout.input.name])
        got = 0
        deadline = time.monotonic() + 60
        while got < 100 and time.monotonic() < deadline:
            got += len([m for m in consumer.consume(100, 1.0) if m.error() is None])
        consumer.commit(asynchronous=False)
        producer.begin_transaction()
        producer.produce(layout.summaries.name, key=b"car-0", value=b"{}")
        producer.send_offsets_to_transaction(
            [TopicPartition(layout.input.name, 0, 1)], consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    finally:
        consumer.close()
        producer.flush(10)


def kafka_class_archive(progress: Callable[[str], None] = print) -> Path | None:
    """This Java's and Kafka's archive, built now if it is not yet; None (with one line
    saying why) when it cannot be."""
    return _built(lambda: kafka_classdata.build(train_broker, progress), "Kafka's nodes",
                  progress)


def reader_class_archive(progress: Callable[[str], None] = print,
                         settings: KafkaSettings | None = None) -> Path | None:
    """The Kafka reader JVM's archive for this Java and class path, built now if it is not
    yet, training against the broker of `settings` or, without one, a throwaway node (which
    maps Kafka's archive if it was built first); None (with one line saying why) when it
    cannot be."""

    def build() -> Path:
        if settings is not None:
            return reader_classdata.build(settings, progress)
        built = reader_classdata.cached_archive()
        if built is not None:  # no node to start
            return built

        with tempfile.TemporaryDirectory(prefix="groupscope-reader-training-") as work:
            node = EmbeddedBroker(Path(work), port=free_port())
            try:
                node.start()
                return reader_classdata.build(node.settings, progress)
            finally:
                node.stop()  # a node that did not get ready too

    return _built(build, "the Kafka reader's JVMs", progress)


def train_engine(remote: str) -> None:
    """Every query a replica or `up` sends a fresh engine: the readiness probe (here with a
    grouped warm-up query as well, a superset), and each batch plan (raw and typed feeds;
    unique and repeated batches by the grouping plan, two-row batches by the local plan for
    the typed feed and the interpreted grouping plan for the raw one), so the classes all of
    them load are recorded."""
    check_engine(remote, warm_up=True, timeout=60.0)
    for typed in (False, True):
        summariser = SparkSummariser(remote)
        try:
            summariser.warm_up(typed=typed, both_plans=True)
        finally:
            summariser.reset()


def spark_class_archive(progress: Callable[[str], None] = print) -> Path | None:
    """This Java's and pyspark's archive, built now if it is not yet; None (with one line
    saying why) when it cannot be."""
    return _built(lambda: spark_classdata.build(train_engine, progress), "Spark's engine",
                  progress)


def _built(build: Callable[[], Path], whose: str,
           progress: Callable[[str], None]) -> Path | None:
    try:
        return build()
    except Exception as exc:
        why = one_line(exc)
        progress(f"no class-data archive for {whose} ({why}); they start without one, a few "
                 f"seconds slower")
        return None


def main() -> int:
    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    kafka_classpath()
    # the Kafka reader's classes (backend/kafka/javaadmin), so no process compiles them at start
    compiled_classes(quiet=False)
    compiled_writer(quiet=False)  # and the offsets writer's, started only for a write
    # Spark's archive beside Kafka's two: each recording is mostly one JVM's start on one
    # core, so on two cores the three take about as long as Spark's alone
    with ThreadPoolExecutor(1, thread_name_prefix="spark-archive") as beside:
        spark = beside.submit(spark_class_archive, progress)
        kafka_class_archive(progress)
        # after Kafka's: its training node starts on that archive
        reader_class_archive(progress)
        spark.result()
    return 0


if __name__ == "__main__":
    sys.exit(main())
