"""Pure derivations: assignment diffs, lag in messages and seconds, ownership, streams."""

from __future__ import annotations

import pytest

from backend.cluster.partitioner import partition_for
from backend.observer.collect import RawMember, RawObservation
from backend.observer.derive import (
    Move,
    assignment_diff,
    choose_topic,
    lag_messages,
    lag_seconds,
    member_views,
    partition_views,
    stream_views,
    worst,
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


def test_lag_seconds_is_zero_when_caught_up_and_exact_with_a_record_timestamp():
    assert lag_seconds(100, 100, [], now_ms=50_000) == 0.0
    assert lag_seconds(90, 100, [], now_ms=50_000, exact_ts_ms=47_500) == 2.5


def test_lag_seconds_interpolates_between_end_offset_observations():
    # end was 100 at t=10 s and 200 at t=20 s: offset 149 arrived when the end passed 150,
    # i.e. at 15 s; at now = 25 s the oldest unprocessed record is 10 s old
    points = [(100, 10_000), (200, 20_000), (300, 30_000)]
    assert lag_seconds(149, 300, points, now_ms=25_000) == pytest.approx(10.0)
    # exactly at a sighting: committed 199 -> end 200 seen at 20 s
    assert lag_seconds(199, 300, points, now_ms=25_000) == pytest.approx(5.0)


def test_lag_seconds_uses_the_last_sighting_of_an_unchanged_end():
    # the end sat at 100 from 10 s to 18 s, then was 110 at 19 s: record 100 arrived in (18, 19]
    points = [(100, 10_000), (100, 18_000), (110, 19_000)]
    assert lag_seconds(100, 110, points, now_ms=20_000) == pytest.approx(20 - 18.1)


def test_lag_seconds_older_than_history_is_a_lower_bound_and_none_without_data():
    points = [(500, 10_000), (600, 20_000)]
    assert lag_seconds(100, 600, points, now_ms=30_000) == pytest.approx(20.0)
    assert lag_seconds(100, 600, [], now_ms=30_000) is None


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
    parts = partition_views(obs, "t", {}, {0: 9_000}, {2: "WARN"})
    assert [(p.partition, p.owner, p.lag_messages) for p in parts] == [
        (0, "rep-a", 5), (1, "rep-a", 0), (2, "rep-b", 7), (3, "rep-b", 3)]
    assert parts[0].lag_seconds == 1.0 and parts[0].lag_seconds_exact
    assert parts[2].health == "WARN" and parts[3].committed is None
    members = member_views(obs, "t", parts)
    assert [(m.client_id, m.partitions, m.idle, m.lag_messages) for m in members] == [
        ("rep-a", (0, 1), False, 5), ("rep-b", (2, 3), False, 10), ("rep-c", (), True, 0)]


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
