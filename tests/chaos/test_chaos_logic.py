"""The chaos harness's pure parts: the plan, the verdict and the stall maths."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest

from backend.chaos.progress import StallTracker
from backend.chaos.schedule import KILL, STOP, plan
from backend.chaos.verify import judge


def test_plan_is_reproducible_bounded_and_varied() -> None:
    a = plan(600, seed=7, start=3, low=1, high=5)
    assert a == plan(600, seed=7, start=3, low=1, high=5)
    assert a != plan(600, seed=8, start=3, low=1, high=5)
    assert all(1 <= x.replicas <= 5 for x in a)
    assert all(later.at_s > earlier.at_s for earlier, later in pairwise(a))
    assert 600 / 9 - 2 <= len(a) <= 600 / 4 + 1
    kinds = Counter(x.kind for x in a)
    assert set(kinds) == {"kill", "stop", "start", "scale"} and kinds["kill"] >= kinds["stop"]
    # kills and stops always leave at least `low` replicas in the plan
    count = 3
    for x in a:
        if x.kind in (KILL, STOP):
            assert x.replicas == count - 1 >= 1
        count = x.replicas


def test_plan_rejects_impossible_bounds() -> None:
    with pytest.raises(ValueError):
        plan(60, 1, start=0, low=0, high=2)
    with pytest.raises(ValueError):
        plan(60, 1, start=4, low=1, high=3)


def _summary(count: int, last_seq: int, duplicates: int = 0, gaps: int = 0) -> dict:
    return {"count": count, "last_seq": last_seq, "duplicates": duplicates, "gaps": gaps}


def test_a_complete_stream_passes_and_duplicates_are_counted_not_lost() -> None:
    v = judge({"car-01": 100, "car-02": 50},
              {"car-01": _summary(100, 99), "car-02": _summary(57, 49, duplicates=7)})
    assert (v.produced, v.processed, v.lost, v.duplicates, v.unexpected) == (150, 157, 0, 7, 0)


def test_missing_tail_gaps_and_absent_streams_are_lost() -> None:
    v = judge({"a": 100, "b": 100, "c": 10},
              {"a": _summary(90, 89),  # the last 10 never processed
               "b": _summary(97, 99, gaps=3)})  # three seqs skipped in the middle
    lost = {s.stream_id: s.lost for s in v.streams}
    assert lost == {"a": 10, "b": 3, "c": 10} and v.lost == 23


def test_seqs_beyond_what_was_produced_are_flagged() -> None:
    v = judge({"a": 10}, {"a": _summary(12, 11), "ghost": _summary(3, 2)})
    assert v.unexpected == 2 + 3 and v.lost == 0


def test_stall_is_time_without_commit_progress_while_lag_waits() -> None:
    s = StallTracker()
    for t, committed, lag in [(0, 0, 10), (1, 10, 5), (2, 10, 5), (3.5, 10, 8), (4, 30, 0),
                              (9, 30, 0), (10, 30, 3), (11, 31, 2)]:
        s.observe(t, committed, lag)
    assert s.longest_s == pytest.approx(2.5)  # 1 → 3.5; idle time without lag is no stall


def test_a_commit_going_backwards_is_not_progress() -> None:
    s = StallTracker()
    for t, committed in [(0, 100), (1, 90), (2, 95), (3, 101)]:
        s.observe(t, committed, 5)
    assert s.longest_s == pytest.approx(2.0)
