"""Malformed input: the cheap checks done in Python, and the dead-letter record we publish.

Checks that need no parsing (null value, no key, oversized) always happen here. "Not JSON",
missing and wrong-typed fields are found where the message is parsed: by Spark's `from_json`
with the raw feed (spark_summary.py), or by the single orjson parse of the typed feed
(`parse_checked`), so validation never costs a parse of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

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


_TELEMETRY_FIELDS = ("stream_id", "seq", "ts")


def parse_checked(
    key: bytes, value: bytes, numeric: tuple[str, ...]
) -> tuple[dict | None, str | None]:
    """The typed feed's one parse per message, which is also its validation.

    Mirrors the Spark-side checks (spark_summary.reason_column) so both feeds dead-letter
    the same records with the same reasons.
    """
    try:
        d = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None, REASON_NOT_JSON
    if not isinstance(d, dict) or not any(d.get(f) is not None
                                          for f in (*_TELEMETRY_FIELDS, *numeric)):
        return None, REASON_NOT_JSON
    if not isinstance(d.get("stream_id"), str):
        return None, "missing or wrong-typed field: stream_id"
    for f in ("seq", "ts"):
        v = d.get(f)
        if type(v) is not int:
            return None, f"missing or wrong-typed field: {f}"
    for f in numeric:
        v = d.get(f)
        if type(v) is not float and type(v) is not int:
            return None, f"missing or wrong-typed field: {f}"
    if d["seq"] < 0:
        return None, "negative seq"
    if d["stream_id"].encode() != key:
        return None, REASON_KEY_MISMATCH
    return d, None
