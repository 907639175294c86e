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
