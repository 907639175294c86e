"""Each Burrow-style health rule, on hand-made offset windows."""

from __future__ import annotations

from backend.contracts.overview import worst
from backend.observer.evaluate import (
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
    `evaluate_partition` on the whole window at every step."""
    import random

    rng = random.Random(7)
    rules = Rules(window=5, min_points=3, min_span_ms=2000)
    for walk in range(300):
        windows = OffsetWindows(rules)
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
            for owned in (True, False):
                assert windows.evaluate(walk, owned) == evaluate_partition(kept, owned, rules), (
                    kept, owned)
