"""Decoding group generations / epochs from `__consumer_offsets` records (pure)."""

from __future__ import annotations

import struct

from backend.observer.generation import (
    java_string_hash,
    offsets_partition,
    parse_group_record,
    parse_target_epoch,
)


def key(kind: int, group: str) -> bytes:
    g = group.encode()
    return struct.pack(">hh", kind, len(g)) + g


def test_java_string_hash_and_partition_match_the_coordinator():
    assert java_string_hash("hello") == 99162322  # Java: "hello".hashCode()
    assert java_string_hash("") == 0
    assert java_string_hash("telemetry-summariser") == -1544106082
    assert offsets_partition("telemetry-summariser", 50) == 1544106082 % 50


def test_classic_group_metadata_generation_old_and_flexible_versions():
    v3 = struct.pack(">hh", 3, 8) + b"consumer" + struct.pack(">i", 17) + b"rest..."
    assert parse_group_record(key(2, "g1"), v3) == ("g1", 17)
    v4 = struct.pack(">h", 4) + bytes([9]) + b"consumer" + struct.pack(">i", 18) + b"\x00"
    assert parse_group_record(key(2, "g1"), v4) == ("g1", 18)
    assert parse_group_record(key(2, "g1"), None) == ("g1", None)  # group deleted


def test_consumer_group_epoch_and_other_records_ignored():
    value = struct.pack(">hi", 0, 42) + b"\x00"
    assert parse_group_record(key(3, "g2"), value) == ("g2", 42)
    commit_key = struct.pack(">hh", 1, 2) + b"g2" + b"..."
    assert parse_group_record(commit_key, b"whatever") is None
    assert parse_group_record(key(5, "g2"), b"member record") is None
    assert parse_group_record(None, None) is None


def test_kip848_target_assignment_epoch_with_and_without_tagged_fields():
    plain = struct.pack(">hi", 0, 11) + b"\x00"  # version 0, AssignmentEpoch, no tags
    assert parse_target_epoch(key(6, "g3"), plain) == ("g3", 11)
    # Kafka 4.3 adds AssignmentTimestamp as tagged field 0 after the epoch
    tagged = struct.pack(">hi", 0, 12) + bytes([1, 0, 8]) + struct.pack(">q", 1_700_000_000_000)
    assert parse_target_epoch(key(6, "g3"), tagged) == ("g3", 12)
    assert parse_target_epoch(key(6, "g3"), None) == ("g3", None)  # group deleted
    # the group epoch record and member records are not target epochs, and vice versa
    assert parse_target_epoch(key(3, "g3"), plain) is None
    assert parse_target_epoch(key(7, "g3"), b"member target") is None
    assert parse_group_record(key(6, "g3"), plain) is None
    assert parse_target_epoch(None, None) is None


def test_no_generation_reader_is_started_while_the_cluster_refuses_connections():
    """Starting it would wait out its 5 s metadata timeout on every poll of an outage."""
    from backend.kafka.settings import KafkaSettings
    from backend.netutil import free_port
    from backend.observer.observer import Observer

    obs = Observer(KafkaSettings(bootstrap=f"127.0.0.1:{free_port()}"), "g")
    try:
        for _ in range(3):
            assert "refused" in (obs.poll_once().error or "")
        assert obs._gen is None
    finally:
        obs.stop()
