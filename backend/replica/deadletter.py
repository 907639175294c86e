"""Malformed input: the cheap checks done in Python, and the dead-letter record we publish.

Only checks that need no parsing happen here (null value, no key, oversized); "not JSON",
missing and wrong-typed fields are found by Spark's `from_json` (see spark_summary.py), so the
hot path never runs a Python JSON parser per message.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.contracts import MAX_MESSAGE_BYTES

REASON_NULL_VALUE = "null value"
REASON_NO_KEY = "missing key"
REASON_OVERSIZED = "oversized"
REASON_NOT_JSON = "not a JSON telemetry object"
REASON_KEY_MISMATCH = "stream_id does not match key"


def cheap_reason(
    key: bytes | None, value: bytes | None, limit: int = MAX_MESSAGE_BYTES
) -> str | None:
    """A reason to dead-letter without parsing, or None if the message goes to Spark."""
    if value is None:
        return REASON_NULL_VALUE
    if not key:
        return REASON_NO_KEY
    if len(value) > limit:
        return f"{REASON_OVERSIZED} ({len(value)} bytes > {limit})"
    return None


@dataclass(frozen=True)
class DeadLetter:
    """One rejected input record: where it came from, what it was, and why."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    reason: str

    def headers(self, source_topic: str, replica: str) -> list[tuple[str, bytes]]:
        return [
            ("reason", self.reason.encode()),
            ("source.topic", source_topic.encode()),
            ("source.partition", str(self.partition).encode()),
            ("source.offset", str(self.offset).encode()),
            ("replica", replica.encode()),
        ]

    def publish_value(self) -> bytes | None:
        """Oversized values are truncated so the dead-letter topic never rejects them."""
        if self.value is not None and len(self.value) > MAX_MESSAGE_BYTES:
            return self.value[:1024]
        return self.value
