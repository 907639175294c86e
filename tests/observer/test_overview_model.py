"""The overview's per-group memory with plain values: lag, rate, catch-up, health, rebalances."""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections import Counter

import pytest

from backend.contracts.history import PARTITION_LAG_STEP_MS
from backend.contracts.overview import TREND_POINTS
from backend.kafka.groups import GroupDescription, GroupMember
from backend.observer.evaluate import OffsetPoint, OffsetWindows
from backend.observer.overview_collect import GroupReading, Listed
from backend.observer.overview_model import OverviewModel, catch_up_seconds, lag_rate

T = "orders"


def member(mid: str, *partitions: int) -> GroupMember:
    return GroupMember(mid, f"client-{mid}", "/10.0.0.1", tuple((T, p) for p in partitions))


def reading(ms: int, committed: dict[int, int], *members: GroupMember, state: str = "Stable",
            group: str = "g") -> GroupReading:
    desc = GroupDescription(group, state, "classic", "range", tuple(members))
    return GroupReading(group, ms, desc, {(T, p): o for p, o in committed.items()})


ENDS = {(T, 0): 100, (T, 1): 100}
# what an OverviewModel may keep per quiet group of ten partitions (9.0 KB measured on
# Python 3.11; three empty deques a group took it to 13.3, ten points a window to 10.9)
MAX_QUIET_GROUP_BYTES = 10_000


def test_lag_rate_is_the_slope_over_the_last_minute_and_none_without_span():
    assert lag_rate([], []) is None
    assert lag_rate([0], [10]) is None
    assert lag_rate([0, 500], [10, 20]) is None  # under a second
    assert lag_rate([0, 10_000, 20_000], [100, 50, 0]) == pytest.approx(-5.0)
    # points older than the span do not bend the slope
    assert lag_rate([0, 100_000, 110_000], [10_000, 0, 10]) == pytest.approx(1.0)
    # a steady lag over the span is no slope at all, whatever came before it; the same
    # first and last lag with others between is a slope like any other
    assert lag_rate([0, 10_000, 20_000], [7, 7, 7]) == 0.0
    assert lag_rate([0, 100_000, 110_000, 120_000], [5, 9, 9, 9]) == 0.0
    assert lag_rate([0, 10_000, 20_000, 30_000], [9, 5, 9, 9]) == pytest.approx(0.04)


def test_catch_up_needs_a_shrinking_lag():
    assert catch_up_seconds(0, None) == 0.0
    assert catch_up_seconds(100, -5.0) == pytest.approx(20.0)
    assert catch_up_seconds(100, 0.0) is None
    assert catch_up_seconds(100, 3.0) is None
    assert catch_up_seconds(None, -1.0) is None


def test_listed_groups_are_pending_until_described_and_vanished_ones_forgotten():
    model = OverviewModel()
    model.listed([Listed("a", "Empty", "classic"), Listed("b", "Stable", "consumer")])
    rows = model.rows()
    assert [r.group for r in rows] == ["a", "b"]
    assert all(r.pending and r.lag_messages is None for r in rows)
    assert rows[1].protocol == "consumer"
    model.update(reading(1000, {0: 90}, group="a", state="Empty"), ENDS, {}, own=False)
    assert not model.row("a").pending
    model.listed([Listed("a", "Empty", "classic")])
    assert [r.group for r in model.rows()] == ["a"]


def test_lag_counts_uncommitted_owned_partitions_from_the_log_start_and_clamps_below_it():
    model = OverviewModel()
    row = model.update(reading(1000, {0: 5}, member("m1", 0, 1)), ENDS,
                       {(T, 0): 20, (T, 1): 40}, own=True)
    by_p = {p.partition: p for p in row.partitions}
    assert by_p[0].lag_messages == 80  # commit 5 is below the log start 20
    assert by_p[1].committed is None and by_p[1].lag_messages == 60
    assert row.lag_messages == 140 and row.members == 1 and row.own
    assert by_p[0].owner == "client-m1"


def test_markers_only_before_the_end_mean_caught_up_and_known_times_give_seconds():
    model = OverviewModel()
    row = model.update(reading(10_000, {0: 99, 1: 90}), ENDS, {}, own=False,
                       oldest_unread_ms={(T, 0): None, (T, 1): 4_000})
    by_p = {p.partition: p for p in row.partitions}
    at = row.described_ms
    assert by_p[0].lag_messages == 0 and by_p[0].lag_seconds(at) == 0.0
    assert by_p[1].lag_messages == 10 and by_p[1].lag_seconds(at) == pytest.approx(6.0)
    assert row.max_lag_seconds == pytest.approx(6.0)


def test_a_share_groups_reported_lag_is_its_partitions_lag_where_the_broker_reports_one():
    model = OverviewModel()
    desc = GroupDescription("q", "Stable", "share", "simple", (member("m1", 0, 1),
                                                               member("m2", 0, 1)))
    # start offsets 40 and 70; the broker reports 25 records not yet acknowledged on
    # partition 0 (end - start says 60) and nothing on partition 1
    got = GroupReading("q", 10_000, desc, {(T, 0): 40, (T, 1): 70},
                       reported_lag={(T, 0): 25})
    row = model.update(got, ENDS, {}, own=False, oldest_unread_ms={(T, 0): 7_000})
    by_p = {p.partition: p for p in row.partitions}
    assert (by_p[0].committed, by_p[0].lag_messages) == (40, 25)
    # the oldest record not acknowledged
    assert by_p[0].lag_seconds(row.described_ms) == pytest.approx(3.0)
    assert (by_p[1].committed, by_p[1].lag_messages) == (70, 30)
    assert row.lag_messages == 55 and row.lag_trend == (55,)
    assert row.protocol == "share" and row.members == 2


def test_trend_rate_and_catch_up_follow_successive_readings():
    model = OverviewModel()
    for i, committed in enumerate((40, 50, 60, 70)):
        row = model.update(reading(i * 10_000, {0: committed, 1: committed}, member("m", 0, 1)),
                           ENDS, {}, own=False)
    assert row.lag_trend == (120, 100, 80, 60)
    assert row.lag_rate == pytest.approx(-2.0)
    assert row.catch_up_seconds == pytest.approx(30.0)
    assert not row.falling_behind


def test_the_trend_keeps_the_last_points_and_its_rate_only_the_last_minute():
    model = OverviewModel()
    for i in range(TREND_POINTS + 5):  # one point every 2 s, the committed offset climbing
        row = model.update(reading(i * 2_000, {0: min(i, 100)}), ENDS, {}, own=False)
    assert row.lag_trend == tuple(100 - i for i in range(5, TREND_POINTS + 5))
    assert row.lag_rate == pytest.approx(-0.5)  # one message every 2 s, whatever came before


def test_a_stuck_owned_partition_stalls_and_an_unowned_lagging_one_stops():
    model = OverviewModel()
    for i in range(5):
        stalled = model.update(reading(i * 1000, {0: 50}, member("m", 0)), ENDS, {},
                               own=False)
        stopped = model.update(reading(i * 1000, {0: 50}, group="e", state="Empty"), ENDS, {},
                               own=False)
    assert stalled.health == "STALL"
    assert stopped.health == "STOP"


def test_a_failed_reading_is_err_and_keeps_its_line():
    model = OverviewModel()
    model.listed([Listed("g", "Stable", "classic")])
    row = model.update(GroupReading("g", 1000, None, {}, "cannot describe: GROUP_AUTH"),
                       ENDS, {}, own=False)
    assert row.health == "ERR" and row.error == "cannot describe: GROUP_AUTH"
    assert not row.pending


def test_one_rebalance_per_episode_and_the_hour_window_forgets_old_ones():
    model = OverviewModel()
    m1, m2 = member("m1", 0, 1), member("m2")
    model.update(reading(0, {}, m1), ENDS, {}, own=False)
    model.update(reading(1000, {}, m1, m2, state="PreparingRebalance"), ENDS, {}, own=False)
    model.update(reading(2000, {}, m1, m2, state="CompletingRebalance"), ENDS, {}, own=False)
    row = model.update(reading(3000, {}, member("m1", 0), member("m2", 1)), ENDS, {},
                       own=False)
    assert row.rebalances_last_hour == 1 and row.last_rebalance_ms == 1000
    assert row.rebalances_24h == 1 and row.rebalance_times == (1000,)
    assert row.last_cause == "joined" and not row.rebalancing
    # a change seen between two settled polls (the rebalance fell between them) counts too,
    # from the earlier poll: its start is bounded by the two
    row = model.update(reading(4000, {}, member("m1", 0, 1)), ENDS, {}, own=False)
    assert row.rebalances_last_hour == 2 and row.last_rebalance_ms == 3000
    row = model.update(reading(4000 + 3_600_001, {}, member("m1", 0, 1)), ENDS, {}, own=False)
    assert row.rebalances_last_hour == 0 and row.last_rebalance_ms == 3000
    assert row.rebalances_24h == 2
    row = model.update(reading(4000 + 86_400_001, {}, member("m1", 0, 1)), ENDS, {}, own=False)
    assert row.rebalances_24h == 0 and row.last_rebalance_ms == 3000


def test_the_memory_gets_each_cycles_episodes_states_and_lag_and_a_seed_continues_counts():
    from backend.history.store import Seed

    model = OverviewModel()
    model.seed(Seed(starts={"g": (-7_200_000, -1000)}, last_cause={"g": (-1000, "expired")},
                    counters={}))
    m1, m2 = member("m1", 0, 1), member("m2")
    row = model.update(reading(0, {}, m1), ENDS, {}, own=False)
    assert (row.rebalances_24h, row.rebalances_last_hour) == (2, 1)
    assert (row.last_rebalance_ms, row.last_cause) == (-1000, "expired")
    episodes, states, lag = model.drain()
    assert episodes == [] and [s.state for s in states] == ["Stable"]
    assert [(p.lag, p.partitions) for p in lag] == [(200, {("orders", 0): 100,
                                                           ("orders", 1): 100})]
    model.update(reading(1000, {}, m1, m2, state="PreparingRebalance"), ENDS, {}, own=False)
    row = model.update(reading(2000, {}, member("m1", 0), member("m2", 1)), ENDS, {},
                       own=False)
    episodes, states, lag = model.drain()
    assert [(e.start_ms, e.end_ms) for e in episodes] == [(1000, None), (1000, 2000)]
    assert [s.state for s in states] == ["PreparingRebalance", "Stable"]
    assert lag == []  # unchanged lag, partitions not due yet: nothing to write
    assert (row.rebalances_24h, row.last_cause) == (3, "joined")


def test_the_overview_raises_the_collectors_thresholds_and_never_lowers_them():
    import gc

    from backend.observer.overview import COLLECTOR_THRESHOLDS, relax_collector

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        relax_collector()
        assert gc.get_threshold() == COLLECTOR_THRESHOLDS
        higher = (COLLECTOR_THRESHOLDS[0] * 2, 5, 5)
        gc.set_threshold(*higher)
        relax_collector()
        assert gc.get_threshold() == higher
    finally:
        gc.set_threshold(*before)


@pytest.mark.parametrize("group", ["g", "orders-eu", "payments"])
def test_a_stuck_groups_lag_is_written_once_then_as_it_changes_or_every_keepalive(group):
    """Its lag does not move and its age grows by the time between: nothing new to keep
    until its keepalive, due first at the group's phase and then every LAG_KEEPALIVE_MS; a
    moving lag is written every cycle."""
    from backend.observer.overview_model import LAG_KEEPALIVE_MS, lag_phase_ms

    assert LAG_KEEPALIVE_MS == PARTITION_LAG_STEP_MS  # the keepalive rides the step
    model = OverviewModel()
    oldest = {(T, 0): 0, (T, 1): 0}  # the first unread records, written at the epoch

    def written(ms: int, committed: int = 10) -> int:
        model.update(reading(ms, {0: committed, 1: committed}, group=group), ENDS, {},
                     own=False, oldest_unread_ms=oldest)
        return len(model.drain()[2])

    first = 10_000
    due = first + PARTITION_LAG_STEP_MS - lag_phase_ms(group)
    assert written(first) == 1
    quiet = range(first + 10_000, due, 10_000)
    assert [written(t) for t in quiet] == [0] * len(quiet)
    assert written(due) == 1  # still alive, said at its phase
    quiet = range(due + 10_000, due + LAG_KEEPALIVE_MS, 10_000)
    assert [written(t) for t in quiet] == [0] * len(quiet)
    assert written(due + LAG_KEEPALIVE_MS) == 1  # and every keepalive after
    assert written(due + LAG_KEEPALIVE_MS + 10_000, committed=12) == 1  # it moved


def test_a_clusters_groups_seen_in_one_cycle_write_their_periodic_points_spread_out():
    """65 000 groups first seen together must not all write their partitions' lag in one
    cycle every five minutes: each is due at its own phase of the step."""
    from backend.observer.overview_model import lag_phase_ms

    phases = [lag_phase_ms(f"group-{i}") for i in range(10_000)]
    assert all(0 <= p < PARTITION_LAG_STEP_MS for p in phases)
    per_cycle = Counter(p // 10_000 for p in phases)  # watch's cycles, 10 s apart
    assert len(per_cycle) == PARTITION_LAG_STEP_MS // 10_000
    assert max(per_cycle.values()) < 3 * len(phases) / len(per_cycle)


def _kept_per_group(groups: int, cycles: int, partitions: int = 10) -> float:
    """Bytes of Python objects an OverviewModel keeps per Empty group with committed offsets
    (four in five lagging, as bench/overview.py's cluster) once its windows are full."""
    tps = {g: [(f"t{g % 30}", p) for p in range(partitions)] for g in range(groups)}
    ends = {tp: 1000 for g in tps for tp in tps[g]}
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        model = OverviewModel("c")
        for i in range(cycles):
            now = 1_700_000_000_000 + i * 10_000
            for g, mine in tps.items():
                lagging = g % 5 != 0
                reading = GroupReading(f"g{g}", now, GroupDescription(f"g{g}", "Empty",
                                                                        "classic", None, ()),
                                       {tp: 900 if lagging else 1000 for tp in mine})
                model.update(reading, ends, {}, own=False, oldest_unread_ms={
                    tp: now - 60_000 if lagging else None for tp in mine})
            model.drain()
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / groups
    finally:
        tracemalloc.stop()


def test_a_quiet_groups_memory_stays_within_its_bound():
    # 65 000 such groups are watch's bench (bench/README.md, "The overview's memory per
    # group"): a few hundred bytes more a group is tens of MiB there
    assert _kept_per_group(300, 12) <= MAX_QUIET_GROUP_BYTES


def _replay(seed: int, steps: int = 120) -> list:
    """A group's rows over `steps` cycles of a random walk that rests most of the time: its
    commits, log ends, log start, record times and members now and then move."""
    rnd = random.Random(seed)
    tps = [(T, p) for p in range(6)]
    committed = {tp: 50 for tp in tps}
    ends = {tp: 100 for tp in tps}
    starts: dict = {}
    times: dict = {}
    members: tuple = ()
    model = OverviewModel()
    rows = []
    now = 1_700_000_000_000
    for _ in range(steps):
        now += rnd.choice((1_000, 5_000, 10_000))
        if rnd.random() < 0.1:
            committed[rnd.choice(tps)] += rnd.choice((-20, 5, 10, 50))
        if rnd.random() < 0.1:
            ends[rnd.choice(tps)] += rnd.choice((1, 30))
        if rnd.random() < 0.05:
            starts[rnd.choice(tps)] = 70
        if rnd.random() < 0.1:
            times = {tp: rnd.choice((None, now - 30_000, 1_699_999_000_000))
                     for tp in rnd.sample(tps, 3)}
        if rnd.random() < 0.05:
            members = rnd.choice(((), (member("m1", 0, 1, 2),),
                                  (member("m1", 0, 1), member("m2", 2, 3, 4, 5))))
        state = "Stable" if members else "Empty"
        rows.append(model.update(reading(now, {p: o for (_t, p), o in committed.items()}, *members,
                                         state=state), ends,
                                 starts, own=False, oldest_unread_ms=dict(times)))
    return rows


@pytest.mark.parametrize("seed", range(8))
def test_partitions_left_unfed_while_settled_give_the_rows_every_partition_fed_gives(
        seed, monkeypatch):
    fast = _replay(seed)
    monkeypatch.setattr(OffsetWindows, "settled", lambda self, partition: False)
    assert fast == _replay(seed)


def test_a_settled_window_is_a_full_one_of_one_repeated_point_over_the_least_span():
    windows = OffsetWindows()
    for i in range(10):
        assert not windows.settled("p")  # not full yet
        windows.add("p", OffsetPoint(i * 1000, 5, 20))
    assert windows.settled("p")
    windows.add("p", OffsetPoint(10_000, 6, 19))
    assert not windows.settled("p")  # it moved
    quick = OffsetWindows()
    for i in range(10):
        quick.add("q", OffsetPoint(i * 100, 5, 20))
    assert not quick.settled("q")  # 0.9 s: too short to have judged it


def test_rows_come_in_name_order_whatever_order_the_cluster_lists_them_in():
    model = OverviewModel()
    model.listed([Listed("b", "Empty", "classic"), Listed("a", "Empty", "classic")])
    assert [r.group for r in model.rows()] == ["a", "b"]
    model.update(reading(1000, {0: 90}, group="c", state="Empty"), ENDS, {}, own=False)
    model.update(reading(1000, {0: 90}, group="a", state="Empty"), ENDS, {}, own=False)
    assert [r.group for r in model.rows()] == ["a", "b", "c"]
    model.listed([Listed("c", "Empty", "classic"), Listed("b", "Stable", "classic"),
                  Listed("a", "Empty", "classic")])
    rows = model.rows()
    assert [r.group for r in rows] == ["a", "b", "c"]
    assert rows[1].state == "Stable" and not rows[0].pending
