"""Unit tests for the pure parts: summary merge, duplicates/gaps, validation, batching, config."""

from __future__ import annotations

import math

import pytest

from backend.contracts import MAX_MESSAGE_BYTES
from backend.contracts.summary import RING_SIZE, BatchPartial, FieldStats, Summary, WindowAgg
from backend.replica.batch import (
    BACKLOG_GROWTH,
    CAUGHT_UP_MS,
    WORTH_ROWS,
    BatchSizing,
    MicroBatch,
)
from backend.replica.deadletter import (
    REASON_NO_KEY,
    REASON_NULL_VALUE,
    DeadLetter,
    cheap_reason,
)
from backend.replica.membership import GroupChoice, MembershipConfigError


def partial(seqs: list[int], last_seq: int, sid: str = "car-01", window: int = 0,
            speed: float = 10.0) -> BatchPartial:
    """What Spark would return for these seqs, computed the slow obvious way."""
    old = sum(1 for s in seqs if s <= last_seq)
    new = {s for s in seqs if s > last_seq}
    stats = FieldStats(len(seqs), speed * len(seqs), speed * speed * len(seqs), speed, speed)
    return BatchPartial(sid, 0, count=len(seqs), old=old, new_distinct=len(new),
                        min_seq=min(seqs), max_seq=max(seqs), min_ts=min(seqs), max_ts=max(seqs),
                        fields={"speed_kmh": stats},
                        windows={window: WindowAgg(window, len(seqs), {"speed_kmh": stats})})


def merged(*batches: list[int]) -> Summary:
    s = Summary("car-01", 0)
    for seqs in batches:
        s.merge_batch(partial(seqs, s.last_seq))
    return s


def test_contiguous_batches_are_complete():
    s = merged(list(range(0, 10)), list(range(10, 25)))
    assert (s.count, s.last_seq, s.duplicates, s.gaps) == (25, 24, 0, 0)
    assert s.complete
    assert s.first_ts == 0 and s.last_ts == 24


def test_replayed_batch_counts_duplicates_not_gaps():
    # at-least-once replay after a crash: offsets 5..14 come again
    s = merged(list(range(0, 15)), list(range(5, 20)))
    assert s.count == 30 and s.last_seq == 19
    assert s.duplicates == 10 and s.gaps == 0
    assert s.count - s.duplicates == s.last_seq + 1
    assert s.complete


def test_duplicates_inside_one_batch():
    s = merged([0, 1, 1, 2, 2, 2, 3])
    assert s.duplicates == 3 and s.gaps == 0 and s.last_seq == 3 and s.complete


def test_missing_seqs_are_gaps():
    s = merged([0, 1, 2], [5, 6], [8])
    assert s.gaps == 3  # 3, 4 and 7
    assert not s.complete
    first = merged([3, 4])  # the stream's first seen seq is not 0
    assert first.gaps == 3


def test_field_stats_mean_stddev_and_merge():
    a = FieldStats()
    for v in (2.0, 4.0, 4.0, 4.0):
        a.merge(FieldStats(1, v, v * v, v, v))
    b = FieldStats(4, 20.0, 100.0 + 4 * 0.0, 5.0, 5.0)  # four 5.0s: sumsq 100
    a.merge(b)
    values = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 5.0, 5.0]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    assert a.count == 8 and a.min == 2.0 and a.max == 5.0
    assert a.mean == pytest.approx(mean) and a.stddev == pytest.approx(std)
    assert FieldStats().mean is None and FieldStats().stddev is None


def test_window_ring_is_bounded_and_merges_same_window():
    s = Summary("car-01", 0)
    for i in range(RING_SIZE + 5):
        s.merge_batch(partial([i], s.last_seq, window=i * 10_000))
    s.merge_batch(partial([RING_SIZE + 5], s.last_seq, window=(RING_SIZE + 4) * 10_000))
    assert len(s.windows) == RING_SIZE
    assert s.windows[0].start == 5 * 10_000
    assert s.windows[-1].count == 2


def test_round_trip_and_summary_merge():
    s = merged(list(range(0, 10)))
    back = Summary.from_dict(s.to_dict())
    assert back.to_dict() == s.to_dict()
    other = Summary("car-01", 0)
    other.merge_batch(partial(list(range(10, 20)), 9))
    back.merge(other)
    assert back.count == 20 and back.last_seq == 19 and back.fields["speed_kmh"].count == 20


def test_partial_fold_across_windows():
    a = partial([0, 1, 2], -1, window=0)
    a.add(partial([3, 4], -1, window=10_000))
    assert a.count == 5 and a.new_distinct == 5 and a.min_seq == 0 and a.max_seq == 4
    assert sorted(a.windows) == [0, 10_000]


def test_cheap_validation():
    assert cheap_reason(b"car-01", b"{}") is None
    assert cheap_reason(b"car-01", None) == REASON_NULL_VALUE
    assert cheap_reason(None, b"{}") == REASON_NO_KEY
    assert cheap_reason(b"", b"{}") == REASON_NO_KEY
    big = b"x" * (MAX_MESSAGE_BYTES + 1)
    assert cheap_reason(b"car-01", big).startswith("oversized")
    d = DeadLetter(3, 42, b"car-01", big, "oversized")
    assert len(d.publish_value()) == 1024
    assert ("reason", b"oversized") in d.headers("telemetry", "r1")
    assert ("source.offset", b"42") in d.headers("telemetry", "r1")


def test_typed_feed_validation_matches_the_contract():
    from backend.contracts import NUMERIC_FIELDS
    from backend.replica.deadletter import parse_checked

    good = (b'{"stream_id":"car-01","seq":3,"ts":5,"speed_kmh":1.5,"rpm":900,"gear":2,'
            b'"engine_temp_c":80,"lat":1.0,"lon":2.0}')
    d, reason = parse_checked(b"car-01", good, NUMERIC_FIELDS)
    assert reason is None and d["seq"] == 3
    cases = {
        b"nope": "not JSON",
        b"[1]": "JSON is not an object",
        b"{}": "missing or wrong-typed field: stream_id",
        good.replace(b'"seq":3', b'"seq":3.5'): "missing or wrong-typed field: seq",
        good.replace(b'"seq":3', b'"seq":true'): "missing or wrong-typed field: seq",
        good.replace(b'"rpm":900', b'"rpm":"900"'): "missing or wrong-typed field: rpm",
        good.replace(b'"ts":5,', b""): "missing or wrong-typed field: ts",
        good.replace(b'"seq":3', b'"seq":-1'): "negative seq",
        good.replace(b"car-01", b"car-02"): "stream_id does not match key",
    }
    for value, want in cases.items():
        assert parse_checked(b"car-01", value, NUMERIC_FIELDS) == (None, want), value


def test_micro_batch_split_and_due():
    b = MicroBatch()
    for i in range(6):
        b.add(i % 3, 100 + i, b"car-%02d" % i, b"{}")
    b.add(1, 200, b"car-01", None)
    assert len(b) == 7 and len(b.dead) == 1
    assert b.next_offsets == {0: 104, 1: 201, 2: 106}
    out = b.split([1])
    assert out.partitions == [1, 1] and len(out.dead) == 1 and out.next_offsets == {1: 201}
    assert b.partitions == [0, 2, 0, 2] and 1 not in b.next_offsets
    assert b.to_arrow().num_rows == 4
    sizing = BatchSizing(batch_ms=1000, batch_max=100)
    assert sizing.due(b, b.started + 2.0)
    assert not sizing.due(b, b.started)
    assert BatchSizing(batch_ms=1000, batch_max=4).due(b, b.started)
    assert not sizing.due(MicroBatch(), 1e9)


def test_batches_grow_with_the_backlog_and_come_soon_once_caught_up():
    b = MicroBatch()
    for i in range(10):
        b.add(0, i, b"car-01", b"{}")
    sizing = BatchSizing(batch_ms=1000, batch_max=100)
    assert sizing.room(b) == 90
    # a backlog: the batch waits for size (or batch_ms), however young
    sizing.took(90, 90)
    assert not sizing.due(b, b.started + 0.5)
    assert sizing.wait_s(b, b.started + 0.5, 0.2) == 0.2
    # full batches while the backlog lasts double the cap, up to BACKLOG_GROWTH times
    for expected in (200, 400, min(800, 100 * BACKLOG_GROWTH), 100 * BACKLOG_GROWTH,
                     100 * BACKLOG_GROWTH):
        sizing.processed(sizing.limit)
        assert sizing.limit == expected
    # caught up (a consume came back short), a trickle of 10 records: not worth a query
    # before batch_ms
    sizing.took(3, 990)
    late = b.started + CAUGHT_UP_MS / 1000 + 1e-3  # float ms: a hair past
    assert not sizing.due(b, late)
    assert sizing.wait_s(b, late, 0.2) == 0.2
    assert sizing.due(b, b.started + 1.0)
    # ... but the first batch after an assignment is due at a quarter second, whatever its size
    sizing.prompt = True
    assert not sizing.due(b, b.started + 0.2)
    assert sizing.due(b, late)
    assert sizing.wait_s(b, b.started + 0.2, 0.2) == pytest.approx(0.05)
    sizing.processed(10)
    assert not sizing.prompt and not sizing.due(b, late)
    # a batch worth a query is due at a quarter second too; and the cap shrinks
    for i in range(10, WORTH_ROWS):
        b.add(0, i, b"car-01", b"{}")
    assert sizing.due(b, late) and not sizing.due(b, b.started + 0.2)
    for expected in (125, 100, 100):
        sizing.processed(10)
        assert sizing.limit == expected
    # batch_ms below the caught-up delay stays the bound
    assert BatchSizing(batch_ms=100, batch_max=100, backlog=False).due(b, b.started + 0.101)


def test_failed_batch_absorbs_what_arrived_meanwhile_in_order():
    """A Spark failure puts the batch back in front of the records consumed while it ran."""
    inflight, later = MicroBatch(), MicroBatch()
    for i in range(4):
        inflight.add(i % 2, 10 + i, b"car-%02d" % i, b"{}")
    later.add(1, 20, b"car-01", b"{}")
    later.add(2, 5, b"car-02", None)  # a dead letter on a partition new to the batch
    started = inflight.started
    inflight.split([0])  # partition 0 was revoked while Spark ran: its next owner re-reads it
    inflight.absorb(later)
    assert inflight.partitions == [1, 1, 1] and inflight.offsets == [11, 13, 20]
    assert inflight.next_offsets == {1: 21, 2: 6}  # commit covers both, never partition 0
    assert len(inflight.dead) == 1 and inflight.started == started


@pytest.mark.parametrize(("protocol", "assignor", "incremental", "props"), [
    ("classic", None, False, {"partition.assignment.strategy": "range"}),
    ("classic", "roundrobin", False, {"partition.assignment.strategy": "roundrobin"}),
    ("classic", "cooperative-sticky", True,
     {"partition.assignment.strategy": "cooperative-sticky"}),
    ("consumer", None, True, {"group.protocol": "consumer", "group.remote.assignor": "uniform"}),
    ("consumer", "range", True, {"group.remote.assignor": "range"}),
])
def test_group_choice(protocol, assignor, incremental, props):
    choice = GroupChoice.parse(protocol, assignor)
    assert choice.incremental is incremental
    conf = choice.consumer_properties()
    assert props.items() <= conf.items()
    if protocol == "consumer":
        assert "session.timeout.ms" not in conf and "heartbeat.interval.ms" not in conf
    else:
        assert conf["session.timeout.ms"] == 6000 and conf["heartbeat.interval.ms"] == 500


@pytest.mark.parametrize(("protocol", "assignor"), [
    ("classic", "uniform"), ("consumer", "cooperative-sticky"), ("consumer", "roundrobin"),
    ("eager", None), ("classic", "sticky"),
])
def test_rejected_combinations(protocol, assignor):
    with pytest.raises(MembershipConfigError):
        GroupChoice.parse(protocol, assignor)
