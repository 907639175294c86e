"""The bounded, thread-safe snapshot history."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from backend.contracts import (
    SNAPSHOT_JSON,
    MemberView,
    PartitionView,
    RebalanceView,
    Snapshot,
)
from backend.observer.store import SnapshotStore
from dashboard.live_model import stale_note


def snap(t: int) -> Snapshot:
    return Snapshot(taken_ms=t, group="g", topic="t", state="Stable", protocol="classic",
                    assignor="range", generation=None, members=(), partitions=(), streams=(),
                    rebalances=())


def test_bounded_history_latest_and_at():
    store = SnapshotStore(maxlen=3)
    assert store.latest() is None and store.at(5) is None
    for t in (10, 20, 30, 40):
        store.append(snap(t))
    assert len(store) == 3
    assert [s.taken_ms for s in store.history()] == [20, 30, 40]
    assert [s.taken_ms for s in store.history(since_ms=30)] == [30, 40]
    assert store.latest().taken_ms == 40
    assert store.at(35).taken_ms == 30 and store.at(15) is None
    with pytest.raises(ValueError):
        store.append(snap(5))


def test_a_failed_poll_is_shown_over_the_last_good_snapshot_and_says_how_old_it_is():
    store = SnapshotStore()
    good = replace(snap(10_000), partitions=(PartitionView(0, "m1", 5, 9, 4, 1.0),))
    failed = replace(snap(20_000), state="Unknown", error="describe timed out")
    first = replace(failed, taken_ms=5_000)
    store.append(first)  # nothing good yet: the failure itself, and no age to give
    assert store.latest_shown() is first and stale_note(first, 5_000) == ""
    store.append(good)
    assert store.latest_shown() is good  # a good poll is shown as it is
    store.append(failed)
    store.append(replace(failed, taken_ms=21_000))
    shown = store.latest_shown()
    assert (shown.partitions, shown.state, shown.taken_ms, shown.error) == (
        good.partitions, "Stable", 10_000, "describe timed out")
    assert store.latest() is not shown and store.latest().error  # the history is untouched
    assert "(11 s ago)" in stale_note(shown, 21_000)
    assert stale_note(good, 21_000) == ""


def test_concurrent_readers_never_see_a_broken_history():
    store = SnapshotStore(maxlen=100)
    errors = []

    def writer():
        for t in range(5000):
            store.append(snap(t))

    def reader():
        for _ in range(2000):
            h = store.history()
            ts = [s.taken_ms for s in h]
            if ts != sorted(ts) or len(ts) > 100:
                errors.append(ts)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader)
                                                   for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and len(store) == 100


def test_snapshot_round_trips_through_its_dict():
    s = Snapshot(taken_ms=1, group="g", topic="t", state="Stable", protocol="consumer",
                 assignor="uniform", generation=4,
                 members=(MemberView(member_id="m", client_id="c", host="h", partitions=(0, 1),
                                     target_partitions=(0, 1, 2)),),
                 partitions=(PartitionView(partition=0, owner="c", committed=5, end=9,
                                           lag_messages=4, lag_seconds=1.5),),
                 streams=(), rebalances=(RebalanceView(start_ms=1, end_ms=2, generation=4,
                                                       joined=("x",), left=(),
                                                       moved=((0, "a", "b"),)),))
    assert SNAPSHOT_JSON.validate_python(SNAPSHOT_JSON.dump_python(s)) == s
    assert SNAPSHOT_JSON.validate_json(SNAPSHOT_JSON.dump_json(s)) == s
