"""Pure derivations: assignment diffs, lag in messages and seconds, ownership, streams."""

from __future__ import annotations

import math

import pytest

from backend.contracts.overview import worst
from backend.kafka.partitioner import partition_for
from backend.observer.collect import RawMember, RawObservation
from backend.observer.derive import (
    Move,
    assignment_diff,
    choose_topic,
    effective_lag,
    first_unread,
    lag_messages,
    lag_seconds,
    member_views,
    partition_views,
    stream_views,
    unread_ranges,
)


def test_assignment_diff_reports_moves_new_and_orphaned_partitions():
    before = {0: "a", 1: "a", 2: "b", 3: "b", 5: "c"}
    after = {0: "a", 1: "c", 2: "a", 3: "b", 4: "c"}
    assert assignment_diff(before, after) == [
        Move(1, "a", "c"), Move(2, "b", "a"), Move(4, None, "c"), Move(5, "c", None)]


def test_assignment_diff_of_identical_assignments_is_empty():
    assert assignment_diff({0: "a", 1: "b"}, {1: "b", 0: "a"}) == []


@pytest.mark.parametrize("committed,end,start,expected", [
    (90, 100, 0, 10),
    (100, 100, 0, 0),
    (120, 100, 0, 0),  # a commit ahead of a truncated log is not negative lag
    (None, 100, 30, 70),  # no commit: everything still in the log
    (10, 100, 40, 60),  # committed below the log start: only what is left counts
])
def test_lag_messages(committed, end, start, expected):
    assert lag_messages(committed, end, start) == expected


def test_lag_messages_of_a_drained_partition_is_zero():
    # commit marker at 99: end - committed = 1, but nothing is left to process
    assert lag_messages(99, 100, 0, drained=True) == 0
    assert lag_messages(None, 100, 40, drained=True) == 0


def test_first_unread_clamps_to_the_log_start():
    assert first_unread(None, 30) == 30
    assert first_unread(10, 40) == 40
    assert first_unread(50, 40) == 50


def test_lag_seconds_is_zero_when_caught_up_and_exact_with_a_record_timestamp():
    assert lag_seconds(100, 100, now_ms=50_000) == 0.0
    assert lag_seconds(120, 100, now_ms=50_000) == 0.0  # commit ahead of a truncated log
    assert lag_seconds(90, 100, now_ms=50_000, record_ts_ms=47_500) == 2.5


def test_lag_seconds_without_a_record_timestamp_is_unknown_never_a_guess():
    assert lag_seconds(90, 100, now_ms=50_000) is None
    assert lag_seconds(None, 100, now_ms=50_000, start=100) == 0.0  # empty log: nothing left


def test_lag_seconds_of_only_markers_left_is_zero_however_long_it_sits():
    for now in (1_000, 60_000, 3_600_000, 10**13):
        assert lag_seconds(99, 100, now_ms=now, drained=True) == 0.0
        assert lag_seconds(99, 100, now_ms=now, record_ts_ms=500, drained=True) == 0.0


@pytest.mark.parametrize("ts", [0, 1, 49_999, 50_000, 50_001, 10**15])
def test_lag_seconds_is_finite_and_never_negative(ts):
    value = lag_seconds(90, 100, now_ms=50_000, record_ts_ms=ts)
    assert value is not None and math.isfinite(value) and value >= 0.0
    assert value == max(0.0, (50_000 - ts) / 1000)


def test_unread_ranges_ask_only_partitions_with_something_left():
    tps = [("t", p) for p in range(5)]
    committed = {("t", 0): 5, ("t", 1): 10, ("t", 3): 2}  # 2 and 4: no commit
    ends = {("t", 0): 10, ("t", 1): 10, ("t", 2): 7, ("t", 3): 9, ("t", 4): 4}
    starts = {("t", 3): 6, ("t", 4): 4}
    assert unread_ranges(committed, ends, starts, tps) == {
        ("t", 0): (5, 10),  # behind
        ("t", 2): (0, 7),  # no commit: from the log start
        ("t", 3): (6, 9),  # committed below the log start: from the start
    }


def test_effective_lag_reads_the_record_times_answer():
    times = {1: 7_000, 2: None}
    assert effective_lag(5, 10, 0, 10_000, times, 1) == (5, 3.0)  # a data record: its age
    assert effective_lag(9, 10, 0, 10_000, times, 2) == (0, 0.0)  # only a marker left
    assert effective_lag(5, 10, 0, 10_000, times, 3) == (5, None)  # not learnt
    assert effective_lag(10, 10, 0, 10_000, times, 3) == (0, 0.0)  # caught up


def _obs(members, committed, ends, topic="t", n=4):
    return RawObservation(taken_ms=10_000, group="g", state="Stable", protocol="classic",
                          assignor="range", members=tuple(members),
                          committed={(topic, p): o for p, o in committed.items()},
                          end_offsets={(topic, p): o for p, o in ends.items()},
                          start_offsets={}, partition_counts={topic: n})


def test_partition_and_member_views_give_owner_lag_and_idle_members():
    a = RawMember("id-a", "rep-a", "/10.0.0.1", (("t", 0), ("t", 1)))
    b = RawMember("id-b", "rep-b", "/10.0.0.2", (("t", 2), ("t", 3)))
    idle = RawMember("id-c", "rep-c", "/10.0.0.3", ())
    obs = _obs([b, idle, a], {0: 5, 1: 10, 2: 0}, {0: 10, 1: 10, 2: 7, 3: 3})
    # 0: a record at 9 s; 1: caught up; 2: only markers after the commit; 3: not learnt
    parts = partition_views(obs, "t", {0: 9_000, 2: None}, {2: "WARN"})
    assert [(p.partition, p.owner, p.lag_messages) for p in parts] == [
        (0, "rep-a", 5), (1, "rep-a", 0), (2, "rep-b", 0), (3, "rep-b", 3)]
    assert [(p.lag_seconds, p.lag_seconds_exact) for p in parts] == [
        (1.0, True), (0.0, True), (0.0, True), (None, False)]
    assert parts[2].health == "WARN" and parts[3].committed is None
    members = member_views(obs, "t", parts)
    assert [(m.client_id, m.partitions, m.idle, m.lag_messages) for m in members] == [
        ("rep-a", (0, 1), False, 5), ("rep-b", (2, 3), False, 3), ("rep-c", (), True, 0)]


def test_stream_views_use_murmur2_for_known_keys_and_the_seen_partition_for_samples():
    owners = {p: f"rep-{p % 2}" for p in range(6)}
    views = stream_views({"car-01": None, "car-02": None, "odd-key": 4}, 6, owners)
    by_id = {v.stream_id: v for v in views}
    assert by_id["car-01"].partition == partition_for("car-01", 6)
    assert by_id["car-01"].source == "murmur2"
    assert by_id["car-01"].owner == owners[partition_for("car-01", 6)]
    assert (by_id["odd-key"].partition, by_id["odd-key"].source) == (4, "sampled")
    # after partitions were added, a key seen in a partition still counts where it was seen
    assert stream_views({"x": 9}, 6, owners)[0].source == "murmur2"


def test_choose_topic_and_worst():
    obs = _obs([], {}, {}, n=4)
    assert choose_topic(obs, None) == "t"
    assert choose_topic(obs, "other") == "other"
    assert worst(["OK", "WARN", "STALL"]) == "STALL"
    assert worst(["OK", "REWIND", "WARN"]) == "REWIND"
    assert worst([]) == "OK"
