"""Decoding group generations / epochs from `__consumer_offsets` records (pure)."""

from __future__ import annotations

import struct

from backend.observer.generation import (
    java_string_hash,
    offsets_partition,
    parse_group_record,
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
