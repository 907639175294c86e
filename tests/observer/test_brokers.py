"""The broker view and the cluster events derived from successive metadata readings (pure)."""

from __future__ import annotations

from types import SimpleNamespace

from backend.contracts import SNAPSHOT_JSON, BrokerView, ClusterEvent, PartitionView, Snapshot
from backend.contracts import ClusterEventType as T
from backend.observer.brokers import (
    BrokerLog,
    BrokerReading,
    Placement,
    broker_views,
    cluster_events,
    live_brokers,
    placement_of,
    totals,
)

LIVE3 = {1: "127.0.0.1:9001", 2: "127.0.0.1:9002", 3: "127.0.0.1:9003"}


def healthy() -> dict[int, Placement]:
    """Six partitions, RF 3, leaders spread 1, 2, 3, 1, 2, 3."""
    return {p: Placement(p % 3 + 1, (1, 2, 3), (1, 2, 3)) for p in range(6)}


def after_losing(broker: int, placements: dict[int, Placement]) -> dict[int, Placement]:
    """What the controller does when it fences `broker`: out of every ISR, leaders moved to
    the first remaining in-sync replica."""
    out = {}
    for p, pl in placements.items():
        isr = tuple(b for b in pl.isr if b != broker)
        leader = pl.leader if pl.leader != broker else (isr[0] if isr else None)
        out[p] = Placement(leader, pl.replicas, isr)
    return out


def reading(ms: int, live: dict[int, str], placements: dict[int, Placement],
            topic: str = "t") -> BrokerReading:
    return BrokerReading(ms, topic, live, placements)


def test_placement_and_brokers_from_confluent_metadata_objects() -> None:
    meta = SimpleNamespace(id=0, leader=2, replicas=[2, 3, 1], isrs=[2, 1], error=None)
    assert placement_of(meta) == Placement(2, (2, 3, 1), (2, 1))
    assert placement_of(SimpleNamespace(leader=-1, replicas=[3], isrs=[])).leader is None
    brokers = {1: SimpleNamespace(id=1, host="127.0.0.1", port=9001)}
    assert live_brokers(brokers) == {1: "127.0.0.1:9001"}


def test_healthy_three_broker_topic() -> None:
    views = broker_views(LIVE3, healthy().values())
    assert [v.broker_id for v in views] == [1, 2, 3]
    assert all(v.up and v.leaders == 2 and v.replicas == 6 for v in views)
    assert all(v.under_replicated == v.out_of_sync == v.offline == 0 for v in views)
    assert views[1].address == "127.0.0.1:9002"
    assert totals(healthy().values()) == (0, 0)


def test_a_down_broker_is_known_from_replica_lists_alone() -> None:
    placements = after_losing(2, healthy())
    live = {b: a for b, a in LIVE3.items() if b != 2}
    views = {v.broker_id: v for v in broker_views(live, placements.values())}
    two = views[2]
    assert not two.up and two.address is None  # never seen up: no address to show
    assert two.leaders == 0 and two.replicas == 6 and two.out_of_sync == 6
    # the leaders that took over count the under-replicated partitions, as Kafka does
    assert views[1].under_replicated + views[3].under_replicated == 6
    assert views[1].leaders + views[3].leaders == 6
    assert totals(placements.values()) == (6, 0)


def test_offline_partition_has_no_leader() -> None:
    placements = {0: Placement(None, (2,), ()), 1: Placement(1, (1,), (1,))}
    views = {v.broker_id: v for v in broker_views({1: "h:1"}, placements.values())}
    assert views[2].offline == 1 and views[2].out_of_sync == 1 and not views[2].up
    assert views[1].offline == 0 and views[1].leaders == 1
    assert totals(placements.values()) == (1, 1)


def test_no_events_without_change() -> None:
    assert cluster_events(reading(1, LIVE3, healthy()), reading(2, LIVE3, healthy())) == []


def test_broker_down_moves_leaders_and_shrinks_isrs() -> None:
    before = reading(1000, LIVE3, healthy())
    after = reading(2000, {1: LIVE3[1], 3: LIVE3[3]}, after_losing(2, healthy()))
    events = cluster_events(before, after)
    assert events[0] == ClusterEvent(2000, T.BROKER_DOWN, "t", None, (2,))
    leaders = [e for e in events if e.type == T.LEADER_CHANGED]
    # partitions 1 and 4 were led by broker 2; the first remaining ISR member (1) took over
    assert [(e.partition, e.before, e.after, e.brokers) for e in leaders] == [
        (1, (2,), (1,), (1,)), (4, (2,), (1,), (1,))]
    shrunk = [e for e in events if e.type == T.ISR_SHRUNK]
    assert [e.partition for e in shrunk] == list(range(6))
    assert all(e.brokers == (2,) and e.before == (1, 2, 3) and e.after == (1, 3)
               for e in shrunk)
    # the order a failure unfolds in: down, leaders, ISR
    assert [e.type for e in events] == ([T.BROKER_DOWN] + [T.LEADER_CHANGED] * 2
                                        + [T.ISR_SHRUNK] * 6)


def test_broker_back_up_then_isr_expands() -> None:
    down = after_losing(2, healthy())
    back = reading(3000, LIVE3, down)  # registered again, still catching up
    events = cluster_events(reading(2000, {1: LIVE3[1], 3: LIVE3[3]}, down), back)
    assert events == [ClusterEvent(3000, T.BROKER_UP, "t", None, (2,))]
    caught_up = {p: Placement(pl.leader, pl.replicas, (*pl.isr, 2)) for p, pl in down.items()}
    events = cluster_events(back, reading(4000, LIVE3, caught_up))
    assert [e.type for e in events] == [T.ISR_EXPANDED] * 6
    assert all(e.brokers == (2,) and e.after == (1, 2, 3) for e in events)


def test_leader_lost_and_isr_swap_in_one_poll() -> None:
    before = reading(1, {1: "a"}, {0: Placement(1, (1, 2), (1,))})
    after = reading(2, {1: "a"}, {0: Placement(None, (1, 2), (2,))})
    events = cluster_events(before, after)
    assert [(e.type, e.brokers, e.before, e.after) for e in events] == [
        (T.LEADER_CHANGED, (), (1,), ()),  # no leader: offline
        (T.ISR_SHRUNK, (1,), (1,), (2,)),
        (T.ISR_EXPANDED, (2,), (1,), (2,)),
    ]


def test_partitions_of_another_topic_are_not_compared() -> None:
    before = reading(1, LIVE3, healthy(), topic="a")
    after = reading(2, LIVE3, after_losing(3, healthy()), topic="b")
    assert cluster_events(before, after) == []


def test_log_remembers_brokers_seen_up_and_bounds_events() -> None:
    log = BrokerLog(keep=5)
    assert log.observe(reading(1, LIVE3, {0: Placement(1, (1,), (1,))})) == []
    # broker 3 holds no replica of this topic; once down it is still listed, with its address
    new = log.observe(reading(2, {1: LIVE3[1], 2: LIVE3[2]}, {0: Placement(1, (1,), (1,))}))
    assert [e.type for e in new] == [T.BROKER_DOWN]
    three = {v.broker_id: v for v in log.views()}[3]
    assert three == BrokerView(3, "127.0.0.1:9003", False)
    for i in range(10):  # flapping: events stay bounded, newest last
        log.observe(reading(3 + i, LIVE3 if i % 2 == 0 else {1: LIVE3[1]},
                            {0: Placement(1, (1,), (1,))}))
    events = log.events()
    assert len(events) == 5 and events[-1].ts == 12


def test_snapshot_with_brokers_round_trips_as_json() -> None:
    snap = Snapshot(
        taken_ms=1, group="g", topic="t", state="Stable", protocol="classic", assignor=None,
        generation=1, members=(), streams=(), rebalances=(),
        partitions=(PartitionView(0, None, None, 5, 5, None, leader=None, replicas=(2, 3),
                                  isr=(3,)),),
        brokers=(BrokerView(2, None, False, replicas=1, out_of_sync=1, offline=1),),
        under_replicated=1, offline_partitions=1,
        cluster_events=(ClusterEvent(1, T.BROKER_DOWN, "t", None, (2,)),))
    back = SNAPSHOT_JSON.validate_json(SNAPSHOT_JSON.dump_json(snap))
    assert back == snap
    assert back.partitions[0].offline and back.partitions[0].under_replicated
