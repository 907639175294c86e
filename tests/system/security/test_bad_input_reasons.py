"""Every kind of malformed input gets its reason from the typed feed's validation (pure, fast).

The raw feed (Spark from_json) is held to the same table in tests/replica/test_spark_batch.py
and, end to end on a real broker, in tests/replica/test_replica_edges.py.
"""

from __future__ import annotations

import time

import pytest

from backend.contracts import NUMERIC_FIELDS
from backend.replica.deadletter import FUTURE_TOLERANCE_MS, cheap_reason, parse_checked
from tests.system.security.bad_input import KEY, _dumps, good, malformed

NOW = 1_800_000_000_000


def reason_of(key: bytes | None, value: bytes | None) -> str | None:
    cheap = cheap_reason(key, value)
    if cheap is not None:
        return cheap
    assert key is not None and value is not None
    d, reason = parse_checked(key, value, NUMERIC_FIELDS, NOW)
    assert (d is None) == (reason is not None)
    return reason


@pytest.mark.parametrize("kind,key,value,reason", malformed(NOW), ids=lambda x: x
                         if isinstance(x, str) and len(x) < 40 else "")
def test_each_kind_is_rejected_with_its_reason(kind, key, value, reason):
    assert reason_of(key, value) == reason, kind


def test_at_least_ten_distinct_reasons():
    reasons = {r.split(":")[0] if "field" in r or "number" in r else r
               for _, _, _, r in malformed(NOW)}
    assert len(reasons) >= 10, reasons


def test_good_records_pass_including_edges():
    assert reason_of(KEY, _dumps(good())) is None
    assert reason_of(KEY, _dumps(good(seq=0))) is None
    # integers are fine for numeric fields; a ts right at the bound is still accepted
    assert reason_of(KEY, _dumps(good(gear=3, ts=NOW + FUTURE_TOLERANCE_MS))) is None
    assert reason_of(KEY, _dumps(good(ts=NOW + FUTURE_TOLERANCE_MS + 1))) == \
        "ts too far in the future"


def test_future_bound_defaults_to_processing_time():
    now = int(time.time() * 1000)
    d, reason = parse_checked(KEY, _dumps(good(ts=now + 3_600_000)), NUMERIC_FIELDS)
    assert reason is None and d is not None
    _, reason = parse_checked(KEY, _dumps(good(ts=now + 2 * FUTURE_TOLERANCE_MS)),
                              NUMERIC_FIELDS)
    assert reason == "ts too far in the future"
