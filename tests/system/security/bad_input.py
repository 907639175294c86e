"""One malformed record per kind, with the reason both feeds must give it.

Shared by the pure unit test (typed feed), the Spark batch test (raw feed) and the
real-broker test, so all three prove the same list.
"""

from __future__ import annotations

import time

import orjson

from backend.contracts import MAX_MESSAGE_BYTES

KEY = b"car-01"


def good(seq: int = 3, stream: str = "car-01", **changes: object) -> dict:
    d: dict = {"stream_id": stream, "seq": seq, "ts": 1_700_000_000_000 + seq * 100,
               "speed_kmh": 41.5, "rpm": 900, "gear": 2, "engine_temp_c": 80.0,
               "lat": 48.1, "lon": 11.5}
    d.update(changes)
    return d


def _dumps(d: dict) -> bytes:
    return orjson.dumps(d)


def _without(name: str) -> bytes:
    return _dumps({k: v for k, v in good().items() if k != name})


def malformed(now_ms: int | None = None) -> list[tuple[str, bytes | None, bytes | None, str]]:
    """(kind, key, value, reason) for every kind of bad input we dead-letter."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    base = _dumps(good())
    return [
        ("null value", KEY, None, "null value"),
        ("no key", None, base, "missing key"),
        ("oversized", KEY, b"{" + b" " * (MAX_MESSAGE_BYTES + 10) + b"}",
         f"oversized ({MAX_MESSAGE_BYTES + 12} bytes > {MAX_MESSAGE_BYTES})"),
        ("binary garbage", KEY, b"\xff\xfe\x00\x81garbage\xc3", "not valid UTF-8"),
        ("bad UTF-8 in a string", KEY, base.replace(b'"car-01"', b'"car-\xff1"'),
         "not valid UTF-8"),
        ("not JSON", KEY, b"this is not json", "not JSON"),
        ("truncated JSON", KEY, base[:-5], "not JSON"),
        ("JSON array", KEY, b"[1, 2, 3]", "JSON is not an object"),
        ("JSON number", KEY, b"42", "JSON is not an object"),
        ("JSON null", KEY, b"null", "JSON is not an object"),
        ("unknown field", KEY, _dumps(good(zz_extra=1, aa_extra=2)), "unknown field: aa_extra"),
        ("missing field", KEY, _without("ts"), "missing or wrong-typed field: ts"),
        ("empty object", KEY, b"{}", "missing or wrong-typed field: stream_id"),
        ("wrong type (string)", KEY, _dumps(good(rpm="fast")),
         "missing or wrong-typed field: rpm"),
        ("wrong type (bool seq)", KEY, _dumps(good(seq=True)),
         "missing or wrong-typed field: seq"),
        ("field is null", KEY, _dumps(good(lat=None)), "missing or wrong-typed field: lat"),
        ("non-integer seq", KEY, _dumps(good(seq=3.5)), "missing or wrong-typed field: seq"),
        ("seq beyond int64", KEY, base.replace(b'"seq":3', b'"seq":9223372036854775808'),
         "missing or wrong-typed field: seq"),
        ("NaN token", KEY, base.replace(b'"speed_kmh":41.5', b'"speed_kmh":NaN'),
         "non-finite number: speed_kmh"),
        ("-Infinity token", KEY, base.replace(b'"rpm":900', b'"rpm":-Infinity'),
         "non-finite number: rpm"),
        ("out-of-range number", KEY, base.replace(b'"engine_temp_c":80.0',
                                                   b'"engine_temp_c":1e999'),
         "non-finite number: engine_temp_c"),
        ("negative seq", KEY, _dumps(good(seq=-1)), "negative seq"),
        ("ts far in the future", KEY, _dumps(good(ts=now_ms + 2 * 86_400_000)),
         "ts too far in the future"),
        ("stream_id/key mismatch", KEY, _dumps(good(stream="car-02")),
         "stream_id does not match key"),
    ]
