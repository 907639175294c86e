"""murmur2 must match the Java client bit for bit, and librdkafka's murmur2 partitioner too."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from backend.kafka.partitioner import murmur2, partition_for, to_positive
from backend.kafka.settings import KafkaSettings
from backend.kafka.topics import ensure_input_topic

# Apache Kafka's own vectors (UtilsTest.testMurmur2), as the signed Java ints it asserts.
KAFKA_VECTORS: dict[bytes, int] = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), list(KAFKA_VECTORS.items()))
def test_murmur2_matches_kafka_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_covers_every_tail_length_and_stays_signed_32_bit() -> None:
    # the vectors above have tails of 2, 2, 0, 2, 0 and 3 bytes; add 1 and the empty input
    assert murmur2(b"") == 275646681
    values = [murmur2(bytes(range(n))) for n in range(0, 40)]
    assert all(-(2**31) <= v < 2**31 for v in values)
    assert len(set(values)) == len(values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)


def test_to_positive_clears_the_sign_bit_like_java() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # where abs() would overflow in Java
    assert to_positive(123) == 123


def test_partition_for_uses_to_positive_then_modulo() -> None:
    # "21" hashes to -973932308; & 0x7fffffff = 1173551340
    assert partition_for("21", 6) == 1173551340 % 6
    assert partition_for(b"21", 7) == 1173551340 % 7
    assert partition_for("car-01", 1) == 0
    with pytest.raises(ValueError, match="at least 1"):
        partition_for("car-01", 0)


def test_partition_for_spreads_fleet_keys_over_all_partitions() -> None:
    keys = [f"car-{i:02d}" for i in range(1, 101)]
    counts = [0] * 6
    for k in keys:
        counts[partition_for(k, 6)] += 1
    assert all(c >= 8 for c in counts), counts


@pytest.mark.parametrize("partitions", [6, 7])
def test_librdkafka_murmur2_random_lands_every_key_on_partition_for(
    kafka: KafkaSettings, unique: str, partitions: int
) -> None:
    topic = f"murmur-{partitions}-{unique}"
    ensure_input_topic(kafka, topic, partitions=partitions)
    keys = [f"car-{i:02d}" for i in range(1, 41)] + ["21", "foobar", "ünïcode-ключ"]
    producer = Producer(kafka.client_config(**{"partitioner": "murmur2_random", "linger.ms": 5}))
    for key in keys:
        producer.produce(topic, key=key.encode(), value=b"x")
    assert producer.flush(15) == 0

    consumer = Consumer(kafka.client_config(**{"group.id": f"g-{unique}",
                                               "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        landed: dict[str, int] = {}
        for _ in range(100):
            for msg in consumer.consume(100, timeout=0.5):
                assert msg.error() is None
                landed[msg.key().decode()] = msg.partition()
            if len(landed) == len(keys):
                break
    finally:
        consumer.close()
    assert sorted(landed) == sorted(keys)
    wrong = {k: (p, partition_for(k, partitions)) for k, p in landed.items()
             if p != partition_for(k, partitions)}
    assert wrong == {}
    assert len(set(landed.values())) == partitions  # and the test covered every partition
