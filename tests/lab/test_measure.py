"""The lab's scoreboard from processed batches: stalls, hand-offs, records processed twice."""

from __future__ import annotations

from collections import namedtuple

import pytest

from backend.contracts.lab import STALL_FACTOR
from backend.lab import run
from backend.lab.measure import (
    Processed,
    Stopped,
    batches,
    cadence,
    percentile,
    processed_twice,
    score,
)

EVENT = 10_000


def steady(partition: int, replica: str, start: int, end: int, every: int = 500,
           stream: str | None = None, duplicates: int = 0) -> list[Processed]:
    """A partition processed every `every` ms from `start` to `end` inclusive."""
    return [Processed(t, partition, replica, stream or f"car-{partition}", duplicates)
            for t in range(start, end + 1, every)]


def test_percentile_is_the_nearest_rank() -> None:
    assert percentile([1, 2, 3, 4], 0.5) == 2
    assert percentile([5], 0.95) == 5
    assert percentile(list(range(1, 101)), 0.95) == 95


def test_one_batch_is_one_write_however_many_streams_it_holds() -> None:
    writes = [Processed(500, 0, "ada", "car-1", 0), Processed(500, 0, "ada", "car-2", 0),
              Processed(1000, 0, "ada", "car-1", 0)]
    assert [b.t_ms for b in batches(writes)[0]] == [500, 1000]
    found = cadence(batches(writes), 0, 2000)
    assert found is not None and found.typical_ms == 500
    assert found.silence_ms == STALL_FACTOR * 500


def test_a_group_that_never_paused_has_no_stall_and_no_hand_off() -> None:
    writes = steady(0, "ada", 0, 20_000) + steady(1, "bruno", 250, 20_250)
    s = score("eager", writes, 0, EVENT, 20_000)
    assert (s.partitions, s.cadence_s) == (2, 0.5)
    assert (s.stopped, s.stalled, s.stalled_s, s.longest_s, s.recovered_s, s.moved, s.twice) == \
        (0, 0, 0.0, 0.0, 0.0, 0, 0)


def test_a_killed_owners_partition_stalls_until_another_takes_it() -> None:
    # partition 0: ada processed until the kill, bruno from 16 s on; partition 1 never paused
    writes = (steady(0, "ada", 0, EVENT) + steady(0, "bruno", 16_000, 30_000)
              + steady(1, "bruno", 0, 30_000))
    s = score("cooperative", writes, 0, EVENT, 30_000, victim="ada")
    assert s.stalled == 1 and s.moved == 1
    assert s.stalled_partitions == s.stopped_partitions == s.victim_partitions == (0,)
    assert s.longest_s == s.stalled_s == pytest.approx(6.0 - 0.5)
    assert s.recovered_s == 6.0


def test_an_eager_rebalance_stalls_every_partition_and_is_timed_to_the_last() -> None:
    writes = []
    for p, back in ((0, 17_000), (1, 17_500), (2, 18_000)):
        writes += steady(p, "ada", 0, 12_000) + steady(p, "bruno", back, 25_000)
    s = score("eager", writes, 0, EVENT, 25_000)
    assert s.stalled == 3 and s.moved == 3
    assert s.recovered_s == 8.0
    assert s.stalled_s == pytest.approx((5.0 - 0.5) + (5.5 - 0.5) + (6.0 - 0.5))


def test_a_silence_just_under_the_stall_limit_is_the_normal_cadence_at_work() -> None:
    gap = int(STALL_FACTOR * 500)
    writes = steady(0, "ada", 0, EVENT) + steady(0, "ada", EVENT + gap, 20_000)
    assert score("eager", writes, 0, EVENT, 20_000).stalled == 0


def test_a_partition_left_waiting_while_its_replica_processed_others_stalled() -> None:
    # ada went on with partition 1 while partition 0 got nothing for 4 s
    writes = (steady(0, "ada", 0, 11_000) + steady(0, "ada", 15_000, 20_000)
              + steady(1, "ada", 0, 20_000))
    s = score("cooperative", writes, 0, EVENT, 20_000)
    assert s.stalled_partitions == (0,) and s.stopped == 0
    assert s.stalled_s == pytest.approx(4.0 - 0.5)


def test_a_replica_slow_on_all_its_partitions_at_once_is_no_stall() -> None:
    # a survivor's catch-up: ada's next batch, of both partitions, came 4 s late; bruno's
    # partition 2, whose owner was killed, stalled by the kill
    slow = [t for t in range(0, 20_001, 500) if not 11_000 < t < 15_000]
    writes = [Processed(t, p, "ada", f"car-{p}", 0) for t in slow for p in (0, 1)]
    writes += steady(2, "bruno", 0, EVENT) + steady(2, "ada", 15_000, 20_000)
    s = score("cooperative", writes, 0, EVENT, 20_000, victim="bruno")
    assert s.stalled_partitions == s.stopped_partitions == s.victim_partitions == (2,)


def test_a_partition_still_silent_at_the_end_did_not_recover() -> None:
    writes = steady(0, "ada", 0, EVENT) + steady(1, "bruno", 0, 20_000)
    s = score("static", writes, 0, EVENT, 20_000)
    assert s.stalled == 1 and s.recovered_s is None
    assert s.longest_s == pytest.approx(10.0 - 0.5)


def test_partitions_added_by_the_event_are_not_measured() -> None:
    writes = steady(0, "ada", 0, 20_000) + steady(1, "ada", 12_000, 20_000)
    assert score("eager", writes, 0, EVENT, 20_000).partitions == 1


def test_records_processed_twice_are_the_growth_of_the_duplicate_counts() -> None:
    writes = [Processed(1000, 0, "ada", "car-1", 2), Processed(1500, 0, "ada", "car-1", 2),
              Processed(12_000, 0, "bruno", "car-1", 9), Processed(13_000, 0, "bruno", "car-1", 9),
              Processed(12_000, 0, "bruno", "car-2", 4)]
    assert processed_twice(writes, EVENT, 20_000) == (9 - 2) + 4


def test_no_batch_before_the_event_is_no_cadence_and_says_so() -> None:
    with pytest.raises(ValueError, match="no normal cadence"):
        score("consumer", steady(0, "ada", 12_000, 20_000), 0, EVENT, 20_000)


def test_a_partition_given_up_in_a_rebalance_stalls_by_its_extra_wait_however_short() -> None:
    # an eager survivor: bruno revoked partition 1 at 12.1 s and had it back by 12.9 s
    writes = steady(1, "bruno", 0, 12_000) + steady(1, "bruno", 12_900, 20_000, every=500)
    stops = [Stopped(12_100, 1, "bruno")]
    s = score("eager", writes, 0, EVENT, 20_000, stops=stops)
    assert s.stalled_partitions == (1,) and s.moved == 0
    assert s.stalled_s == pytest.approx(0.9 - 0.5)
    assert score("cooperative", writes, 0, EVENT, 20_000).stalled == 0  # no stop: in cadence


def test_a_stop_that_cost_no_more_than_a_normal_batch_is_stopped_but_no_stall() -> None:
    writes = steady(0, "ada", 0, 20_000)
    s = score("eager", writes, 0, EVENT, 20_000, stops=[Stopped(12_100, 0, "ada")])
    assert (s.stopped, s.stalled) == (1, 0)


def test_only_the_giving_replicas_stop_counts() -> None:
    writes = steady(0, "ada", 0, 12_000) + steady(0, "ada", 12_900, 20_000)
    stops = [Stopped(12_100, 0, "bruno")]  # another replica's revocation of an older claim
    s = score("eager", writes, 0, EVENT, 20_000, stops=stops)
    assert (s.stopped, s.stalled) == (0, 0)


def test_busy_cores_are_the_share_of_time_not_idle_times_the_cores(monkeypatch) -> None:
    Times = namedtuple("Times", "user system idle iowait")
    monkeypatch.setattr(run.psutil, "cpu_count", lambda: 2)
    before, after = Times(10, 5, 80, 5), Times(40, 15, 120, 5)  # 40 of 80 s busy
    assert run.busy_cores(before, after) == 1.0


def test_an_event_waits_until_every_groups_cadence_is_known_from_three_of_its_intervals():
    from types import SimpleNamespace

    lab = run.LabRun.__new__(run.LabRun)  # the rule reads the groups and the tail alone
    lab.groups = [SimpleNamespace(group="fast"), SimpleNamespace(group="share")]
    writes = {"fast": steady(0, "ada", 0, 20_000), "share": []}
    tail = SimpleNamespace(writes=writes)
    # the share group has not processed a partition twice: no cadence, no event
    assert not lab.baseline_taken(tail, 0, 8_000, min_s=8.0)
    writes["share"] = steady(0, "bea", 2_000, 20_000, every=4_000)  # 2 000, 6 000, 10 000, …
    assert not lab.baseline_taken(tail, 0, 8_000, min_s=8.0)  # known, from one interval
    assert lab.baseline_taken(tail, 0, 12_000, min_s=8.0)  # three of its 4 s intervals
    assert not lab.baseline_taken(tail, 0, 12_000, min_s=15.0)  # and never under min_s


def test_a_group_is_over_an_event_once_every_partition_processed_a_batch_since(monkeypatch):
    from types import SimpleNamespace

    lab = run.LabRun.__new__(run.LabRun)
    lab.fed_after = None
    group = run._Group("eager", "g", pool=None, silence_ms=17_000)
    monkeypatch.setattr(run, "now_ms", lambda: EVENT + 6_000)
    # 6 s after a kill at a 4 s cadence: the survivor's partition 1 processed since, the
    # victim's partition 0 last before the event; within the stall limit, but not over
    tail = SimpleNamespace(latest={"g": {0: EVENT - 1_000, 1: EVENT + 3_000}})
    assert not lab.done(tail, group, EVENT)
    tail.latest["g"][0] = EVENT + 5_000  # taken over and processed: over
    assert lab.done(tail, group, EVENT)
    monkeypatch.setattr(run, "now_ms", lambda: EVENT + 30_000)  # then silent past the limit
    assert not lab.done(tail, group, EVENT)
