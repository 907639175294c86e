"""The typed feed's two parses agree: Arrow's JSON reader for a whole batch at once, and the
per-record parse that finds each bad record and its reason.

Every batch of good records must take the fast way and give the very table the per-record
parse gives; one bad record of any kind must send its batch the careful way, so the bad
record is dead-lettered with its reason and the good ones around it still summarised.
"""

from __future__ import annotations

import random

import orjson
import pyarrow as pa
import pytest

from backend.replica.batch import TYPED_SCHEMA, MicroBatch
from tests.system.security.bad_input import KEY, _dumps, good, malformed

NOW = 1_800_000_000_000


def batch_of(records: list[tuple[bytes | None, bytes | None]]) -> MicroBatch:
    b = MicroBatch()
    for offset, (key, value) in enumerate(records):
        b.add(offset % 3, offset, key, value)
    return b


def random_good(rng: random.Random, i: int) -> tuple[bytes, bytes]:
    """A valid record with the variety real producers send: ints for floats, exponents,
    negative and huge-but-finite numbers, non-ASCII ids, any key order, inner whitespace."""
    sid = rng.choice(["car-01", "car-ü7", "車-3", "x" * 40, 'a"b', "tab\tid"])
    d = good(seq=rng.randrange(0, 2**40), stream=sid, ts=NOW - rng.randrange(0, 10**9))
    for f in ("speed_kmh", "rpm", "gear", "engine_temp_c", "lat", "lon"):
        d[f] = rng.choice([0, -3, 7.25, 1e300, -2.5e-8, rng.uniform(-1e6, 1e6),
                           rng.randrange(-10**15, 10**15)])
    items = list(d.items())
    rng.shuffle(items)
    text = orjson.dumps(dict(items))
    if i % 7 == 0:  # spaces and tabs between tokens are JSON too
        text = text.replace(b",", b", \t")
    return sid.encode(), text


@pytest.mark.parametrize("seed", range(5))
def test_good_batches_parse_at_once_into_the_per_record_table(seed: int) -> None:
    rng = random.Random(seed)
    b = batch_of([random_good(rng, i) for i in range(rng.randrange(1, 400))])
    at_once = b._typed_arrow_at_once(NOW)
    assert at_once is not None, "a batch of good records fell back to the per-record parse"
    per_record, bad = b._typed_arrow_per_record(NOW)
    assert bad == []
    assert at_once.schema == TYPED_SCHEMA
    assert at_once.equals(per_record)
    assert b.to_typed_arrow(NOW) == (at_once, [])


@pytest.mark.parametrize("kind,key,value,reason", malformed(NOW), ids=lambda x: x
                         if isinstance(x, str) and len(x) < 40 else "")
def test_one_bad_record_is_found_with_its_reason_among_good_ones(kind, key, value, reason):
    records = [(KEY, _dumps(good(seq=s))) for s in range(5)]
    records.insert(2, (key, value))
    b = batch_of(records)
    table, bad = b.to_typed_arrow(NOW)
    assert [(d.offset, d.reason) for d in [*b.dead, *bad]] == [(2, reason)], kind
    assert table.column("seq").to_pylist() == [0, 1, 2, 3, 4]
    assert table.column("offset").to_pylist() == [0, 1, 3, 4, 5]


@pytest.mark.parametrize("value", [
    # legal JSON that newline-delimited reading would split or merge
    b'{\n"stream_id": "car-01", "seq": 1, "ts": 5, "speed_kmh": 1, "rpm": 2, "gear": 3,\n'
    b'"engine_temp_c": 4, "lat": 5, "lon": 6\n}',
    b'{"stream_id": "car-01", "seq": 1, "ts": 5, "speed_kmh": 1, "rpm": 2, "gear": 3, '
    b'"engine_temp_c": 4, "lat": 5, "lon": 6}\r',
], ids=["line breaks inside", "trailing carriage return"])
def test_a_good_record_the_reader_cannot_frame_still_counts(value: bytes) -> None:
    b = batch_of([(KEY, _dumps(good(seq=0))), (KEY, value), (KEY, _dumps(good(seq=2)))])
    table, bad = b.to_typed_arrow(NOW)
    assert bad == []
    assert table.column("seq").to_pylist() == [0, 1, 2]


def test_an_empty_batch_is_an_empty_table() -> None:
    table, bad = MicroBatch().to_typed_arrow(NOW)
    assert bad == [] and table.num_rows == 0 and table.schema == TYPED_SCHEMA
    assert isinstance(table, pa.Table)
