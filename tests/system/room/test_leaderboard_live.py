"""The room leaderboard on the real broker: real consumers commit, a real Observer watches.

Two confluent-kafka members share a two-partition topic and commit as they consume; the
leaderboard, fed the Observer's own history, must credit both, call them "sharing", keep
the one that closes as departed with its total, and call a member with no partition
"waiting" once the group has more members than partitions.
"""

from __future__ import annotations

import pytest

from backend.kafka.partitioner import partition_for
from backend.netutil import wait_until
from backend.observer.observer import Observer
from dashboard import leaderboard_model as lb
from tests.dashboard.group import Member, create_topic, produce_keys

PARTITIONS = 2
KEYS = [f"car-{i:02d}" for i in range(12)]


def _fold(board: lb.Leaderboard, observer: Observer) -> dict[str, lb.LeaderRow]:
    board.fold(observer.history(since_ms=board.last_ms))
    return {r.name: r for r in board.rows()}


def _settled(observer: Observer, names: set[str]):
    """The latest Snapshot once the group is Stable with exactly `names`, every partition
    owned; None until then."""
    snap = observer.latest()
    if snap is None or snap.error or snap.state != "Stable":
        return None
    if {m.client_id for m in snap.members} != names or len(snap.members) != len(names):
        return None
    if len(snap.partitions) != PARTITIONS or any(p.owner is None for p in snap.partitions):
        return None
    return snap


def _committed(observer: Observer) -> int:
    """Committed offsets summed over the partitions: messages the group has processed."""
    snap = observer.latest()
    return sum(p.committed or 0 for p in snap.partitions) if snap is not None else 0


@pytest.mark.timeout(240)
def test_leaderboard_credits_sharing_members_keeps_the_departed_and_shows_waiting(kafka, unique):
    topic, group = f"board-{unique}", f"board-{unique}"
    create_topic(kafka, topic, PARTITIONS)
    assert {partition_for(k, PARTITIONS) for k in KEYS} == set(range(PARTITIONS))
    board = lb.Leaderboard()
    members: dict[str, Member] = {}
    observer = Observer(kafka, group, topic=topic, interval=0.5, tail_events=False)
    observer.start()
    try:
        for name in ("m-a", "m-b"):
            members[name] = Member(kafka, group, topic, name)
        wait_until(lambda: _settled(observer, {"m-a", "m-b"}), timeout=60,
                   what="m-a and m-b owning a partition each")

        # A new group has no committed offset to count from: the first commits are the
        # baseline, everything processed after them is credited.
        produce_keys(kafka, topic, KEYS, per_key=5)
        wait_until(lambda: _committed(observer) == 5 * len(KEYS), timeout=60,
                   what="the first commits")
        _fold(board, observer)
        produce_keys(kafka, topic, KEYS, per_key=20)
        wait_until(lambda: _committed(observer) == 25 * len(KEYS), timeout=60,
                   what="the second commits")

        def both_credited():
            rows = _fold(board, observer)
            ok = all(rows.get(n) and rows[n].processed > 0 for n in ("m-a", "m-b"))
            return rows if ok else None

        rows = wait_until(both_credited, timeout=30, what="both members credited")
        per_partition = {k: partition_for(k, PARTITIONS) for k in KEYS}
        owned = {p: rows[n].partitions for n in ("m-a", "m-b") for p in rows[n].partitions}
        assert sorted(owned) == list(range(PARTITIONS))
        for name in ("m-a", "m-b"):
            row = rows[name]
            expected = 20 * sum(1 for p in per_partition.values() if p in row.partitions)
            assert row.processed == expected, (name, row)
            assert row.badge == lb.SHARING and not row.departed
            assert row.host and len(row.partitions) == 1
        assert sum(r.processed for r in rows.values()) == 20 * len(KEYS)
        b_total = rows["m-b"].processed

        members["m-b"].close()  # a graceful leave, by a consumer that publishes no events

        def b_departed():
            if _settled(observer, {"m-a"}) is None:  # m-a takes partition 1 over
                return None
            rows = _fold(board, observer)
            return rows if rows["m-b"].departed and rows["m-a"].badge == lb.SOLO else None

        rows = wait_until(b_departed, timeout=60, what="m-b listed as departed")
        b = rows["m-b"]
        assert b.processed == b_total and b.left_ms is not None
        assert b.how == lb.UNKNOWN_EXIT and b.partitions == ()
        assert rows["m-a"].partitions == tuple(range(PARTITIONS))
        assert [r.name for r in _fold(board, observer).values()][-1] == "m-b"

        for name in ("m-c", "m-d"):  # three members, two partitions
            members[name] = Member(kafka, group, topic, name)
        wait_until(lambda: _settled(observer, {"m-a", "m-c", "m-d"}), timeout=60,
                   what="three members on two partitions")

        def one_waiting():
            rows = _fold(board, observer)
            live = {n: r.badge for n, r in rows.items() if not r.departed}
            return live if sorted(live.values()) == [lb.SHARING, lb.SHARING, lb.WAITING] \
                else None

        live = wait_until(one_waiting, timeout=30, what="one member waiting")
        assert set(live) == {"m-a", "m-c", "m-d"}
        assert _fold(board, observer)["m-b"].departed  # still listed
    finally:
        for m in members.values():
            m.close()
        observer.stop()
