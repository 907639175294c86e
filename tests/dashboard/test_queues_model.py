"""The Queues page's rows from plain values: idle consumer replicas, working sharers, and
each car's proof from both groups."""

from __future__ import annotations

from backend.contracts.control import ReplicaInfo
from backend.contracts.queue_summary import QueueDelta, SeqRanges, fold_deltas
from dashboard.queues_model import car_rows, consumer_rows, rates, share_rows


def _replica(name: str, partitions: tuple[int, ...], state: str = "running") -> ReplicaInfo:
    return ReplicaInfo(name=name, colour="#000000", state=state, pid=1, started_at=0.0,
                       ended_at=None, returncode=None, exit_signal=None, protocol="classic",
                       assignor="range", exactly_once=False, partitions=partitions)


def _queue():
    return fold_deltas([
        QueueDelta("car-01", 0, "ada", 3, SeqRanges.of([(0, 2)])),
        QueueDelta("car-01", 0, "bruno", 2, SeqRanges.of([(5, 6)])),
        QueueDelta("car-01", 0, "ada", 2, SeqRanges.of([(3, 4)]), deliveries={2: 2}),
    ])


def test_a_consumer_replica_without_a_partition_is_idle_and_dead_ones_are_left_out():
    rows = consumer_rows([_replica("ada", (0,)), _replica("bruno", (1,)), _replica("chloe", ()),
                          _replica("dmitri", (), state="killed")])
    assert [(r["replica"], r["working"]) for r in rows] == [
        ("ada", True), ("bruno", True), ("chloe", False)]
    assert rows[2]["partitions"] == "none: idle"


def test_share_rows_count_what_each_replica_summarised():
    rows = share_rows([_replica("ada", (0, 1)), _replica("bruno", (0,)), _replica("chloe", ())],
                      _queue(), {"ada": 12.345})
    assert [(r["replica"], r["summarised"], r["working"], r["msg/s"]) for r in rows] == [
        ("ada", 5, True, 12.3), ("bruno", 2, True, 0.0), ("chloe", 0, False, 0.0)]


def test_rates_are_the_difference_over_the_seconds_and_never_negative():
    assert rates({"ada": 10}, {"ada": 30, "bruno": 4}, 2.0) == {"ada": 10.0, "bruno": 2.0}
    assert rates({"ada": 10}, {"ada": 5}, 1.0) == {"ada": 0.0}
    assert rates({}, {"ada": 5}, 0.0) == {}


def test_each_car_shows_both_proofs():
    consumer = {"car-01": {"count": 7, "duplicates": 0, "gaps": 0},
                "car-02": {"count": 3, "duplicates": 1, "gaps": 0}}
    rows = {r["car"]: r for r in car_rows(consumer, _queue())}
    one = rows["car-01"]
    assert one["consumer group: summarised"] == 7
    assert (one["share group: summarised"], one["share group: out of order"],
            one["share group: redelivered"], one["share group: duplicates"],
            one["share group: lost or in flight"]) == (7, 2, 2, 0, 0)
    assert rows["car-02"]["share group: summarised"] is None


def test_ack_rates_are_between_a_share_replicas_heartbeats_never_negative():
    from backend.contracts import Event
    from dashboard.queues_model import ack_rates, share_beats

    def beat(ts: int, replica: str, processed: int, released: int = 0, share: bool = True,
             in_flight: float = 0.0):
        return Event(ts=ts, group="q", replica=replica, type="heartbeat",
                     fields={"share": share, "processed": processed, "released": released,
                             "rejected": 0, "redelivered": 0, "in_flight": in_flight})

    before = share_beats([beat(0, "ada", 0), beat(2000, "ada", 100, 4), beat(0, "bruno", 50),
                          beat(0, "gus", 0, share=False)])
    assert {n: e.ts for n, e in before.items()} == {"ada": 2000, "bruno": 0}
    after = share_beats([beat(4000, "ada", 300, 4, in_flight=37.5),
                         beat(2000, "bruno", 10),  # restarted
                         beat(0, "chloe", 5)])  # new: no rate yet
    zero = {"accepted": 0.0, "released": 0.0, "rejected": 0.0, "redelivered": 0.0,
            "in flight": 0.0}
    assert ack_rates(before, after) == {"ada": {**zero, "accepted": 100.0, "in flight": 37.5},
                                        "bruno": zero}
    assert ack_rates(after, after) == {}  # no newer heartbeat: nothing to say


def test_deliveries_add_up_over_cars_in_order():
    from dashboard.figures import deliveries_figure
    from dashboard.queues_model import deliveries

    queue = fold_deltas([
        QueueDelta("car-01", 0, "ada", 3, SeqRanges.of([(0, 2)]), deliveries={1: 3}),
        QueueDelta("car-02", 1, "ada", 3, SeqRanges.of([(0, 2)]), deliveries={2: 1, 1: 2}),
    ])
    assert list(deliveries(queue).items()) == [(1, 5), (2, 1)]
    fig = deliveries_figure(deliveries(queue))
    assert list(fig.data[0].x) == ["1", "2"] and list(fig.data[0].y) == [5, 1]
    assert fig.layout.uirevision == "deliveries"
