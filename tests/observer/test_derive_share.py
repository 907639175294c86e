"""Share and streams groups in the pure derivations: sharers instead of one owner, who is idle,
lag per member, streams members' tasks, and the timeline of a share group."""

from __future__ import annotations

from dataclasses import replace

import pytest

from backend.observer.collect import RawMember, RawObservation
from backend.observer.derive import (
    assigned,
    is_shared,
    member_views,
    partition_views,
    share_map,
    stream_views,
)
from backend.observer.timeline import Timeline, frame

TOPIC = "t"


def _obs(protocol: str, members: list[RawMember], committed: dict[int, int] | None = None,
         ends: dict[int, int] | None = None, n: int = 3, taken_ms: int = 10_000,
         state: str = "Stable") -> RawObservation:
    return RawObservation(
        taken_ms=taken_ms, group="g", state=state, protocol=protocol, assignor=None,
        members=tuple(members),
        committed={(TOPIC, p): o for p, o in (committed or {}).items()},
        end_offsets={(TOPIC, p): o for p, o in (ends or {}).items()},
        partition_counts={TOPIC: n})


def _member(client: str, *partitions: int, mid: str | None = None,
            tasks: tuple[str, ...] = ()) -> RawMember:
    return RawMember(mid or f"id-{client}", client, "/10.0.0.1",
                     tuple((TOPIC, p) for p in partitions), tasks=tasks)


# ---- sharers per partition -------------------------------------------------------------

@pytest.mark.parametrize("protocol,members,owners,sharers", [
    # a share group: every partition goes to every member assigned it; no single owner
    ("share", [_member("bruno", 0, 1, 2), _member("ada", 0, 1), _member("chloe", 2)],
     [None, None, None], [("ada", "bruno"), ("ada", "bruno"), ("bruno", "chloe")]),
    # a partition nobody is assigned has no sharer
    ("share", [_member("ada", 0)], [None, None, None], [("ada",), (), ()]),
    # two members with one client id are two sharers
    ("share", [_member("rdkafka", 0, mid="m2"), _member("rdkafka", 0, mid="m1")],
     [None, None, None], [("rdkafka", "rdkafka"), (), ()]),
    # classic and consumer groups: the owner alone, or nobody
    ("classic", [_member("ada", 0, 2), _member("bruno", 1)],
     ["ada", "bruno", "ada"], [("ada",), ("bruno",), ("ada",)]),
    ("consumer", [_member("ada", 0)], ["ada", None, None], [("ada",), (), ()]),
    # a streams group's members have tasks, not partitions
    ("streams", [_member("ada", tasks=("0_0 active",))], [None, None, None], [(), (), ()]),
])
def test_partition_views_give_sharers_for_every_type_and_owners_only_where_there_is_one(
        protocol: str, members: list[RawMember], owners: list[str | None],
        sharers: list[tuple[str, ...]]) -> None:
    parts = partition_views(_obs(protocol, members), TOPIC, {}, {})
    assert [p.owner for p in parts] == owners
    assert [p.sharers for p in parts] == sharers
    if is_shared(protocol):
        assert all(p.owner_member_id is None for p in parts)


def test_a_share_partitions_start_offset_is_its_committed_offset_and_lag_counts_from_it() -> None:
    obs = _obs("share", [_member("ada", 0, 1), _member("bruno", 0, 1)],
               committed={0: 40, 1: 100}, ends={0: 100, 1: 100, 2: 7}, n=3)
    parts = partition_views(obs, TOPIC, {}, {})
    assert [(p.committed, p.end, p.lag_messages) for p in parts] == [
        (40, 100, 60), (100, 100, 0), (None, 7, 7)]


def test_a_share_partitions_reported_lag_is_its_lag_and_the_others_keep_the_arithmetic(
        ) -> None:
    # records past the start offset were acknowledged: the broker counts 25 not yet
    # acknowledged on partition 0 where end - start says 60; it reports nothing for 1 and 2
    obs = replace(_obs("share", [_member("ada", 0, 1), _member("bruno", 0, 1)],
                       committed={0: 40, 1: 90}, ends={0: 100, 1: 100, 2: 7}, n=3),
                  reported_lag={(TOPIC, 0): 25})
    parts = partition_views(obs, TOPIC, {0: 4_000, 1: 6_000}, {})
    assert [(p.committed, p.end, p.lag_messages, p.lag_reported) for p in parts] == [
        (40, 100, 25, True), (90, 100, 10, False), (None, 7, 7, False)]
    # the age is still the record at the start offset's: the oldest not acknowledged
    assert [p.lag_seconds for p in parts[:2]] == [6.0, 4.0]
    # the members' lags and the group's total add up the lags shown
    members = {m.client_id: m.lag_messages for m in member_views(obs, TOPIC, parts)}
    assert members == {"ada": 25 + 10, "bruno": 25 + 10}
    # a reported 0 is a lag of 0, not "not reported"
    caught_up = partition_views(replace(obs, reported_lag={(TOPIC, 0): 0}), TOPIC, {}, {})
    assert (caught_up[0].lag_messages, caught_up[0].lag_reported) == (0, True)


def test_assigned_and_share_map_list_every_member_of_a_partition_once() -> None:
    a = RawMember("id-a", "ada", "h", ((TOPIC, 0), (TOPIC, 0), ("other", 1)))
    b = _member("bruno", 0, 1)
    assert {p: [m.client_id for m in ms] for p, ms in assigned([b, a], TOPIC).items()} == {
        0: ["ada", "bruno"], 1: ["bruno"]}
    assert share_map([b, a], TOPIC) == {0: ("id-a", "id-bruno"), 1: ("id-bruno",)}


# ---- members: idle, lag, tasks ---------------------------------------------------------

@pytest.mark.parametrize("protocol,members,idle", [
    # more share members than partitions: all of them work, each on a shared partition
    ("share", [_member("ada", 0), _member("bruno", 0), _member("chloe", 0)],
     {"ada": False, "bruno": False, "chloe": False}),
    # a share member assigned nothing (not yet reconciled) is idle
    ("share", [_member("ada", 0, 1, 2), _member("bruno")], {"ada": False, "bruno": True}),
    # a streams member is given tasks, not partitions: a task is work, no task is idle
    ("streams", [_member("ada", tasks=("0_0 active", "0_1 active")),
                 _member("bruno", tasks=("0_0 standby",)), _member("chloe")],
     {"ada": False, "bruno": False, "chloe": True}),
    # a classic group keeps its rule: owns nothing on the topic = idle
    ("classic", [_member("ada", 0, 1, 2), _member("bruno")], {"ada": False, "bruno": True}),
])
def test_idle_members_of_every_type(protocol: str, members: list[RawMember],
                                    idle: dict[str, bool]) -> None:
    obs = _obs(protocol, members)
    views = member_views(obs, TOPIC, partition_views(obs, TOPIC, {}, {}))
    assert {m.client_id: m.idle for m in views} == idle


def test_a_share_members_lag_is_the_backlog_of_the_partitions_it_shares() -> None:
    obs = _obs("share", [_member("ada", 0, 1), _member("bruno", 1, 2), _member("chloe")],
               committed={0: 90, 1: 50, 2: 0}, ends={0: 100, 1: 100, 2: 5})
    parts = partition_views(obs, TOPIC, {}, {})
    members = {m.client_id: m.lag_messages for m in member_views(obs, TOPIC, parts)}
    assert members == {"ada": 10 + 50, "bruno": 50 + 5, "chloe": 0}
    # the members' lags overlap on shared partitions; the group's total is the partitions'
    assert sum(p.lag_messages for p in parts) == 65


def test_streams_members_carry_their_tasks_and_other_members_none() -> None:
    tasks = ("0_0 active", "1_0 standby", "0_2 warmup")
    obs = _obs("streams", [_member("ada", tasks=tasks), _member("bruno")])
    views = {m.client_id: m for m in member_views(obs, TOPIC, ())}
    assert views["ada"].tasks == tasks and views["ada"].partitions == ()
    assert views["bruno"].tasks == ()
    classic = member_views(_obs("classic", [_member("ada", 0)]), TOPIC, ())
    assert classic[0].tasks == ()


def test_a_share_groups_streams_have_no_single_owner() -> None:
    obs = _obs("share", [_member("ada", 0, 1, 2), _member("bruno", 0, 1, 2)])
    owners = {pv.partition: pv.owner for pv in partition_views(obs, TOPIC, {}, {})}
    views = stream_views({"car-01": None, "car-02": 1}, 3, owners)
    assert [v.owner for v in views] == [None, None]


# ---- the timeline of a share group -----------------------------------------------------

def test_a_share_groups_frame_has_sharers_and_no_single_owner() -> None:
    f = frame(_obs("share", [_member("ada", 0, 1), _member("bruno", 1, 2)]), TOPIC)
    assert f.assignment == {}
    assert dict(f.shared) == {(TOPIC, 0): ("id-ada",), (TOPIC, 1): ("id-ada", "id-bruno"),
                              (TOPIC, 2): ("id-bruno",)}
    assert frame(_obs("classic", [_member("ada", 0)]), TOPIC).shared == {}


def test_a_share_group_gaining_a_sharer_is_an_episode_that_moves_nothing() -> None:
    timeline = Timeline()
    before = [_member("ada", 0, 1, 2)]
    after = [_member("ada", 0, 1, 2), _member("bruno", 0, 1, 2)]
    for i, members in enumerate([before, before, after, after]):
        timeline.observe(frame(_obs("share", members, taken_ms=1000 * (i + 1)), TOPIC))
    (episode,) = timeline.rebalances()
    assert episode.reason == "assignment" and episode.joined == ("bruno",)
    assert episode.moved == () and episode.left == ()
    # the same members sharing differently is seen too
    timeline.observe(frame(_obs("share", [_member("ada", 0, 1), _member("bruno", 2)],
                                taken_ms=5000), TOPIC))
    assert len(timeline.rebalances()) == 2 and timeline.rebalances()[-1].moved == ()
