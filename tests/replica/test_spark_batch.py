"""The Spark side of a batch on the real engine: validation reasons and per-stream numbers."""

from __future__ import annotations

import sys

import orjson
import pytest

from backend.contracts.summary import Summary
from backend.proc import run
from backend.replica.batch import MicroBatch
from backend.replica.deadletter import (
    REASON_KEY_MISMATCH,
    REASON_NOT_JSON,
    REASON_NOT_OBJECT,
    cheap_reason,
)
from backend.replica.spark_summary import SparkSummariser
from tests.replica.harness import REPO, message
from tests.security.bad_input import malformed


@pytest.fixture
def summariser(spark_remote):
    s = SparkSummariser(spark_remote)
    try:
        yield s
    finally:
        s.reset()


@pytest.mark.parametrize("typed", [False, True], ids=["raw-feed", "typed-feed"])
def test_batch_aggregates_and_rejects_in_spark(summariser, typed):
    b = MicroBatch()
    offset = 0

    def add(key, value, partition=0):
        nonlocal offset
        b.add(partition, offset, key, value)
        offset += 1
        return offset - 1

    for seq in range(20):
        add(b"car-01", message("car-01", seq))
        add(b"car-02", message("car-02", seq), partition=3)
    add(b"car-01", message("car-01", 7))  # seq 7 twice in one batch: a duplicate, not old
    bad = {
        add(b"car-01", b"not json at all"): REASON_NOT_JSON,
        add(b"car-01", b"[1, 2]"): REASON_NOT_OBJECT,
        add(b"car-01", orjson.dumps({**orjson.loads(message("car-01", 99)), "rpm": "fast"})):
            "missing or wrong-typed field: rpm",
        add(b"car-01", orjson.dumps({k: v for k, v in orjson.loads(message("car-01", 99)).items()
                                     if k != "ts"})): "missing or wrong-typed field: ts",
        add(b"car-01", message("car-02", 99)): REASON_KEY_MISMATCH,
        add(b"car-01", message("car-01", 2.5)): "missing or wrong-typed field: seq",
    }
    # every kind in tests/security/bad_input.py that needs a parse to find
    for _kind, key, value, reason in malformed():
        if key is not None and value is not None and cheap_reason(key, value) is None:
            bad[add(key, value)] = reason
    if typed:
        table, rejected = b.to_typed_arrow()
        result = summariser.summarise(table, {"car-01": 4}, typed=True)
        assert not result.bad
        got_bad = {d.offset: d.reason for d in rejected}
    else:
        result = summariser.summarise(b.to_arrow(), {"car-01": 4})
        got_bad = {o: r for p, o, r in result.bad}
    assert got_bad == bad  # both feeds reject the same records for the same reasons

    one, two = result.partials[(0, "car-01")], result.partials[(3, "car-02")]
    assert (one.count, one.old, one.new_distinct, one.min_seq, one.max_seq) == (21, 5, 15, 0, 19)
    assert (two.count, two.old, two.new_distinct) == (20, 0, 20)
    speeds = [40.0 + s % 50 for s in range(20)]
    assert two.fields["speed_kmh"].sum == pytest.approx(sum(speeds))
    assert two.fields["speed_kmh"].max == max(speeds)
    assert sum(w.count for w in two.windows.values()) == 20

    s = Summary("car-01", 0, count=5, last_seq=4)
    s.merge_batch(one)
    assert s.count == 26 and s.last_seq == 19 and s.duplicates == 6 and s.gaps == 0
    assert s.complete


@pytest.mark.parametrize("args", [
    ["--assignor", "uniform"],
    ["--protocol", "consumer", "--assignor", "cooperative-sticky"],
    ["--protocol", "eager"],
    ["--batch-ms", "0"],
])
def test_cli_rejects_bad_combinations_in_one_line(args):
    proc = run([sys.executable, "-m", "backend.cli", "replica", "--id", "x", *args],
               cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("groupscope replica: "), proc.stderr
