"""Kafka's default key partitioner (murmur2), so any tool can say where a stream lives.

The Java client maps a keyed record to `toPositive(murmur2(key)) % partitions`, where
`toPositive(x) = x & 0x7fffffff`; librdkafka's `murmur2`/`murmur2_random` partitioners do the
same. The dashboard, the observer and the tests use `partition_for` to compute the partition
of a stream id without asking the broker, so this must match the clients bit for bit.
"""

from __future__ import annotations

from functools import lru_cache

SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 as in the Java client's `Utils.murmur2`: a signed 32-bit int.

    Arithmetic is done on unsigned 32-bit values (Python ints masked after every multiply),
    and Java's `>>>` is a logical shift, which is what a right shift of a masked value is.
    """
    length = len(data)
    h = (SEED ^ length) & _MASK
    whole = length - (length & 3)
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Java's `Utils.toPositive`: clear the sign bit (not `abs`, which breaks on MIN_VALUE)."""
    return value & 0x7FFFFFFF


def _as_bytes(key: str | bytes) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


@lru_cache(maxsize=4096)
def _hash_of(key: bytes) -> int:
    return to_positive(murmur2(key))


def partition_for(key: str | bytes, num_partitions: int) -> int:
    """The partition the Java default partitioner (and librdkafka murmur2) picks for `key`."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    return _hash_of(_as_bytes(key)) % num_partitions
