"""Each Burrow-style health rule, on hand-made offset windows."""

from __future__ import annotations

import random

from backend.contracts.overview import worst
from backend.observer.evaluate import (
    REJUDGED,
    REPEATED,
    OffsetPoint,
    OffsetWindows,
    Rules,
    evaluate_partition,
)


def w(*points):
    """(committed, lag) pairs, one second apart."""
    return [OffsetPoint(ts_ms=i * 1000, committed=c, lag=lag) for i, (c, lag) in enumerate(points)]


def test_ok_when_lag_touched_zero_in_the_window():
    assert evaluate_partition(w((10, 5), (15, 0), (15, 8), (15, 9)), owned=True) == "OK"


def test_ok_when_consumer_keeps_up_with_shrinking_lag():
    assert evaluate_partition(w((10, 50), (30, 40), (60, 20), (80, 25)), owned=True) == "OK"


def test_warn_when_offsets_move_but_lag_never_shrinks():
    assert evaluate_partition(w((10, 5), (12, 8), (14, 8), (16, 12)), owned=True) == "WARN"


def test_stall_when_an_owned_partition_does_not_move_with_lag():
    assert evaluate_partition(w((10, 5), (10, 9), (10, 12), (10, 15)), owned=True) == "STALL"


def test_stop_when_nobody_owns_a_lagging_partition_that_does_not_move():
    assert evaluate_partition(w((10, 5), (10, 9), (10, 12), (10, 15)), owned=False) == "STOP"
    # never committed at all, nobody reading, records waiting
    assert evaluate_partition(w((None, 5), (None, 6), (None, 7)), owned=False) == "STOP"


def test_rewind_until_the_offset_is_back_where_it_was():
    assert evaluate_partition(w((100, 0), (40, 60), (60, 40)), owned=True) == "REWIND"
    # recovered past the old position: back to the usual rules
    assert evaluate_partition(w((100, 0), (40, 60), (101, 0)), owned=True) == "OK"


def test_too_little_evidence_is_ok():
    assert evaluate_partition([], owned=True) == "OK"
    assert evaluate_partition(w((10, 5), (10, 6)), owned=True) == "OK"  # < min_points
    short = [OffsetPoint(ts_ms=i * 100, committed=10, lag=5) for i in range(5)]
    assert evaluate_partition(short, owned=True) == "OK"  # 0.4 s span < min_span


def test_windows_slide_and_group_takes_the_worst():
    windows = OffsetWindows(Rules(window=3))
    for i, (c, lag) in enumerate([(10, 0), (10, 5), (10, 6), (10, 7)]):
        windows.add(0, OffsetPoint(i * 1000, c, lag))
    # the zero-lag point slid out of a 3-point window: now a stall
    assert windows.evaluate(0, owned=True) == "STALL"
    assert windows.evaluate(1, owned=True) == "OK"  # never seen
    assert worst(["OK", "WARN", "STOP", "STALL"]) == "STOP"


def test_the_windows_shortcut_for_unmoving_partitions_judges_as_the_rules_do():
    """`OffsetWindows` judges a window of repeated points in constant time; over random
    walks (repeats, moves, rewinds, missing commits, owned or not) it must agree with
    `evaluate_partition` on the whole window at every step, and so must `feed` (a point
    added and judged in one call) on windows of its own."""
    rng = random.Random(7)
    rules = Rules(window=5, min_points=3, min_span_ms=2000)
    for walk in range(300):
        windows = OffsetWindows(rules)
        fed = OffsetWindows(rules)
        kept: list[OffsetPoint] = []
        committed: int | None = rng.choice([None, 10])
        lag = rng.randint(0, 3)
        ts = 0
        for _ in range(rng.randint(1, 15)):
            ts += rng.choice([300, 1000])
            roll = rng.random()
            if roll < 0.2:
                committed = (committed or 0) + rng.randint(1, 3)
            elif roll < 0.3:
                committed = max(0, (committed or 0) - 2)
            elif roll < 0.4:
                lag = rng.randint(0, 3)
            point = OffsetPoint(ts, committed, lag)
            windows.add(walk, point)
            kept = [*kept, point][-rules.window:]
            owner = walk % 2 == 0
            assert fed.feed(walk, *point, owned=owner) == evaluate_partition(kept, owner, rules)
            for owned in (True, False):
                assert windows.evaluate(walk, owned) == evaluate_partition(kept, owned, rules), (
                    kept, owned)


def test_a_repeat_added_to_every_window_at_once_judges_as_the_rules_do():
    """`repeat_all` adds a repeated point to every window in constant time, or refuses;
    over random polls that repeat every partition (tried at once), move some, or skip some,
    every window must judge as `evaluate_partition` does on its own points, and the
    windows fed point by point beside it must agree. What it says it did must hold: no
    verdict changed (REPEATED), or each verdict is `steady_verdict`'s (REJUDGED)."""
    rng = random.Random(13)
    rules = Rules(window=5, min_points=3, min_span_ms=2000)
    taken = refused = rejudged = 0
    for _walk in range(300):
        windows, fed = OffsetWindows(rules), OffsetWindows(rules)
        kept: dict[int, list[OffsetPoint]] = {}
        state = {p: [rng.choice([None, 10]), rng.choice([0, 0, 2])] for p in range(3)}
        ts = 0
        for _ in range(rng.randint(1, 20)):
            ts += rng.choice([300, 1000, 1000])
            roll = rng.random()
            if roll < 0.6 and kept and len(kept) == len(state):  # every partition repeats
                before = {(p, owned): evaluate_partition(points, owned, rules)
                          for p, points in kept.items() for owned in (True, False)}
                did = windows.repeat_all(ts)
                if did:
                    taken += 1
                    after = {(p, owned): evaluate_partition(
                        [*points, OffsetPoint(ts, *points[-1][1:])][-rules.window:], owned,
                        rules) for p, points in kept.items() for owned in (True, False)}
                    if did == REPEATED:  # a caller keeps the verdicts it has
                        assert before == after
                    else:  # a caller reads them again, from each partition's lag
                        assert did == REJUDGED and before != after
                        rejudged += 1
                        assert after == {(p, owned): windows.steady_verdict(
                            points[-1].lag, owned) for p, points in kept.items()
                            for owned in (True, False)}
                else:
                    refused += 1
                    for p, points in kept.items():
                        windows.add(p, OffsetPoint(ts, *points[-1][1:]))
                for p, points in kept.items():
                    point = OffsetPoint(ts, *points[-1][1:])
                    fed.add(p, point)
                    kept[p] = [*points, point][-rules.window:]
            else:
                for p in [p for p in state if roll > 0.9 or rng.random() < 0.8]:
                    if rng.random() < 0.3:
                        state[p][0] = (state[p][0] or 0) + 1
                    elif rng.random() < 0.2:
                        state[p][1] = rng.randint(0, 3)
                    point = OffsetPoint(ts, *state[p])
                    windows.add(p, point)
                    fed.add(p, point)
                    kept[p] = [*kept.get(p, []), point][-rules.window:]
            if rng.random() < 0.5:  # not after every poll: repeats taken one after another
                continue                # are caught up with in one step when next read
            for p, points in kept.items():
                for owned in (True, False):
                    expected = evaluate_partition(points, owned, rules)
                    assert windows.evaluate(p, owned) == expected, (p, points, owned)
                    assert fed.evaluate(p, owned) == expected
        for p, points in kept.items():
            assert windows.evaluate(p, True) == evaluate_partition(points, True, rules)
    # both ways were walked: repeats taken at once, and refused (windows not one repeated
    # point over the same polls, or a verdict about to change)
    assert taken > 200 and refused > 200 and rejudged > 20, (taken, refused, rejudged)
    # repeats taken at once leave the windows as feeding them would: one pair each, over
    # one tuple of times shared by all
    windows = OffsetWindows(rules)
    for p in range(3):
        windows.add(p, OffsetPoint(0, 10, 0))  # caught up: no verdict can change
    assert all(windows.repeat_all(i * 1000) for i in range(1, 4))
    assert not windows.all_settled()  # four points: not full yet
    assert all(windows.repeat_all(i * 1000) for i in range(4, 8))
    assert windows.all_settled() and windows.settled(1)
    windows.add(0, OffsetPoint(8000, 10, 0))
    assert not windows.all_settled()
    assert [len(w) for w in windows._windows.values()] == [3, 3, 3]
    assert windows._windows[1][0] is windows._windows[2][0] == (3000, 4000, 5000, 6000, 7000)
    assert windows._windows[0][0] == (4000, 5000, 6000, 7000, 8000)


def test_windows_fed_at_different_polls_judge_as_the_rules_do_and_share_their_times():
    """Partitions of one `OffsetWindows` share the poll times they were all fed at; random
    polls that feed only some (a partition without a known log end is skipped) must still
    judge each as `evaluate_partition` does on its own points."""
    rng = random.Random(11)
    rules = Rules(window=4, min_points=3, min_span_ms=2000)
    for _walk in range(200):
        windows = OffsetWindows(rules)
        kept: dict[int, list[OffsetPoint]] = {}
        state = {p: [rng.choice([None, 10]), rng.randint(0, 3)] for p in range(4)}
        ts = 0
        for _ in range(rng.randint(1, 14)):
            ts += rng.choice([300, 1000])
            for p in [p for p in state if rng.random() < 0.8]:
                roll = rng.random()
                if roll < 0.2:
                    state[p][0] = (state[p][0] or 0) + 1
                elif roll < 0.3:
                    state[p][1] = rng.randint(0, 3)
                point = OffsetPoint(ts, *state[p])
                windows.add(p, point)
                kept[p] = [*kept.get(p, []), point][-rules.window:]
            for p, points in kept.items():
                for owned in (True, False):
                    assert windows.evaluate(p, owned) == evaluate_partition(
                        points, owned, rules), (p, points, owned)
    # fed at every poll, quiet partitions keep one pair and one shared tuple of times
    windows = OffsetWindows(rules)
    for i in range(6):
        for p in range(3):
            windows.add(p, OffsetPoint(i * 1000, 10, 5))
    kept_windows = [windows._windows[p] for p in range(3)]
    assert all(len(w) == 3 for w in kept_windows)
    assert kept_windows[0][0] is kept_windows[1][0] is kept_windows[2][0]
    assert windows.evaluate(0, owned=True) == "STALL"
