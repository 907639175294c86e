"""Malformed input: the cheap checks done in Python, and the dead-letter record we publish.

Checks that need no parsing (null value, no key, oversized) always happen here. The rest
are found where the message is parsed: by Spark's `from_json` with the raw feed
(spark_summary.reason_column), or by the single orjson parse of the typed feed
(`parse_checked`), so validation never costs a parse of its own on good input.

Reasons, first failing check wins, identical for both feeds: null value, missing key,
oversized, not valid UTF-8, not JSON, JSON is not an object, unknown field: F, missing or
wrong-typed field: F (a non-integer or out-of-range seq/ts is wrong-typed), non-finite
number: F, negative seq, ts too far in the future (> processing time + 1 day), stream_id
does not match key.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

import orjson

from backend.contracts import MAX_MESSAGE_BYTES

REASON_NULL_VALUE = "null value"
REASON_NO_KEY = "missing key"
REASON_OVERSIZED = "oversized"
REASON_NOT_UTF8 = "not valid UTF-8"
REASON_NOT_JSON = "not JSON"
REASON_NOT_OBJECT = "JSON is not an object"
REASON_UNKNOWN_FIELD = "unknown field"  # + ": name" (the first, alphabetically)
REASON_WRONG_TYPE = "missing or wrong-typed field"  # + ": name" (in contract order)
REASON_NON_FINITE = "non-finite number"  # + ": name" (NaN, Infinity, 1e999)
REASON_NEGATIVE_SEQ = "negative seq"
REASON_FUTURE_TS = "ts too far in the future"
REASON_KEY_MISMATCH = "stream_id does not match key"

# A `ts` later than processing time + this is rejected: a day absorbs any clock skew a car
# could plausibly have, while a bogus year-2100 timestamp would poison the chart windows.
FUTURE_TOLERANCE_MS = 24 * 3600 * 1000
_TELEMETRY_FIELDS = ("stream_id", "seq", "ts")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


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


def parse_checked(
    key: bytes, value: bytes, numeric: tuple[str, ...], now_ms: int | None = None
) -> tuple[dict | None, str | None]:
    """The typed feed's one parse per message, which is also its validation.

    Mirrors the Spark-side checks (spark_summary.reason_column) check for check and in the
    same order, so both feeds dead-letter the same records with the same reasons. Only
    rejected records pay for a second look (UTF-8 decode, lenient stdlib parse).
    """
    strict = True
    try:
        d = orjson.loads(value)
    except orjson.JSONDecodeError:
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return None, REASON_NOT_UTF8
        try:  # Spark's from_json reads NaN, Infinity and 1e999; find them the same way
            d = json.loads(value)
        except ValueError:
            return None, REASON_NOT_JSON
        strict = False
    if not isinstance(d, dict):
        return None, REASON_NOT_OBJECT
    # Spark lists an object's keys only when it is strict JSON (json_object_keys)
    unknown = sorted(set(d) - set(_TELEMETRY_FIELDS) - set(numeric)) if strict else []
    if unknown:
        return None, f"{REASON_UNKNOWN_FIELD}: {unknown[0]}"
    if not isinstance(d.get("stream_id"), str):
        return None, "missing or wrong-typed field: stream_id"
    for f in ("seq", "ts"):
        v = d.get(f)
        if type(v) is not int or not _INT64_MIN <= v <= _INT64_MAX:
            return None, f"missing or wrong-typed field: {f}"
    for f in numeric:
        v = d.get(f)
        if type(v) is not float and type(v) is not int:
            return None, f"missing or wrong-typed field: {f}"
    for f in numeric:
        if not _finite(d[f]):
            return None, f"{REASON_NON_FINITE}: {f}"
    if d["seq"] < 0:
        return None, REASON_NEGATIVE_SEQ
    if d["ts"] > future_bound_ms(now_ms):
        return None, REASON_FUTURE_TS
    if d["stream_id"].encode() != key:
        return None, REASON_KEY_MISMATCH
    return d, None


def future_bound_ms(now_ms: int | None = None) -> int:
    """Latest acceptable `ts`: processing time plus FUTURE_TOLERANCE_MS."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return now + FUTURE_TOLERANCE_MS


def _finite(v: float | int) -> bool:
    try:
        return math.isfinite(float(v))
    except OverflowError:  # an integer too large for a double
        return False
