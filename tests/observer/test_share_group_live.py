"""The observer on a real share group: two share consumers on one topic, every partition's
sharers in the Snapshot as Kafka's own describe reports them, no single owner anywhere, and
a sharer leaving as a Timeline episode."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer, ShareConsumer

from backend.contracts import Snapshot
from backend.kafka.groups import GroupDescription
from backend.kafka.javaadmin.reader import KafkaReader
from backend.kafka.settings import KafkaSettings
from backend.netutil import wait_until
from backend.observer.observer import Observer
from tests.observer.conftest import create_topic

PARTITIONS = 3
CLIENTS = ("sharer-0", "sharer-1")


def _poll(consumer: ShareConsumer, timeout: float = 0.5) -> int:
    """One poll of a share consumer (a batch of messages); how many records it acquired.
    Polling is what keeps a share member in its group and gets it assigned partitions."""
    answer = consumer.poll(timeout)
    batch = [answer] if answer is None or hasattr(answer, "error") else list(answer)
    return sum(1 for msg in batch if msg is not None and msg.error() is None)


def _sharers(described: GroupDescription | str, topic: str) -> dict[int, tuple[str, ...]]:
    """partition -> sorted client ids of the members Kafka says are assigned it."""
    assert not isinstance(described, str), described
    return {p: tuple(sorted(m.client_id for m in described.members
                            if (topic, p) in m.assignment)) for p in range(PARTITIONS)}


@pytest.mark.broker
def test_a_share_groups_snapshot_names_every_sharer_of_every_partition(
        kafka: KafkaSettings, unique: str) -> None:
    topic, group = f"shared-{unique}", f"share-{unique}"
    create_topic(kafka, topic, PARTITIONS)
    producer = Producer(kafka.client_config())
    consumers = [ShareConsumer(kafka.client_config(**{"group.id": group, "client.id": c}))
                 for c in CLIENTS]
    reader = KafkaReader.shared(kafka)  # the observer's JVM: one Admin child, not two
    observer = Observer(kafka, group, topic, tail_events=False, read_generation=False,
                        exact_lag=False, sample_every=3600)
    try:
        for c in consumers:
            c.subscribe([topic])

        def settled() -> tuple[Snapshot, dict[int, tuple[str, ...]]] | None:
            # a share group starts at the log end: records produced while its members poll
            for i in range(20):
                producer.produce(topic, key=f"car-{i:02d}", value=b"{}")
            producer.flush(10)
            for c in consumers:
                _poll(c)
            before = _sharers(reader.describe([group], "share")[group], topic)
            snap = observer.poll_once()
            after = _sharers(reader.describe([group], "share")[group], topic)
            both_in = (snap.error is None and len(snap.members) == len(CLIENTS)
                       and all(m.partitions for m in snap.members))
            # Kafka's answer the same on both sides of the poll: the snapshot saw it too
            return (snap, after) if both_in and before == after else None

        snap, expected = wait_until(settled, timeout=90,
                                    what="both share consumers assigned, the group settled")
        assert snap.protocol == "share"
        assert sorted(m.client_id for m in snap.members) == list(CLIENTS)
        assert {pv.partition: pv.sharers for pv in snap.partitions} == expected
        assert {p for p, names in expected.items() if names} == set(range(PARTITIONS))
        # no partition of a share group has a single owner, and nobody is idle
        assert all(pv.owner is None and pv.owner_member_id is None for pv in snap.partitions)
        assert not any(m.idle for m in snap.members)
        for m in snap.members:
            assert set(m.partitions) == {p for p, names in expected.items()
                                         if m.client_id in names}

        # a sharer leaving is a Timeline episode: it left, nothing "moved"
        consumers.pop().close()

        def left() -> Snapshot | None:
            _poll(consumers[0])
            snap = observer.poll_once()
            gone = [rb for rb in snap.rebalances if CLIENTS[1] in rb.left]
            return snap if gone and gone[-1].end_ms is not None else None

        snap = wait_until(left, timeout=60, what=f"{CLIENTS[1]} leaving, on the timeline")
        last = [rb for rb in snap.rebalances if CLIENTS[1] in rb.left][-1]
        assert last.moved == () and last.joined == ()
        assert [m.client_id for m in snap.members] == [CLIENTS[0]]
    finally:
        observer.stop()
        reader.close()
        for c in consumers:
            c.close()
