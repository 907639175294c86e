"""A share batch's query on the real engine: per stream the seqs as ranges, the batch's own
disorder, deliveries and field statistics, equal to what the records say one by one."""

from __future__ import annotations

import random

import orjson
import pytest

from backend.contracts.queue_summary import SeqRanges
from backend.replica.batch import MicroBatch
from backend.replica.share_spark import summarise_share
from tests.replica.harness import message


def test_a_share_batch_gives_each_streams_seqs_disorder_and_deliveries(summariser):
    rng = random.Random(7)
    # car-01: 0..39 with 12..15 missing (in flight elsewhere), shuffled; seq 3 twice (a
    # redelivery); car-02 in order on another partition
    car1 = [s for s in range(40) if not 12 <= s <= 15]
    rng.shuffle(car1)
    car1.append(3)
    ones = [("car-01", 0, s) for s in car1]
    twos = [("car-02", 2, s) for s in range(25)]
    arrivals = []  # the two interleaved, each in its own order
    while ones or twos:
        arrivals.append((ones if ones and (not twos or rng.random() < 0.6) else twos).pop(0))
    batch, deliveries = MicroBatch(), []
    for offset, (car, partition, seq) in enumerate(arrivals):
        batch.add(partition, offset, car.encode(), message(car, seq))
        deliveries.append(2 if (car, seq) == ("car-01", 3) and offset > 40 else 1)
    table, bad = batch.to_typed_arrow()
    assert not bad

    deltas, seconds = summarise_share(summariser, table, deliveries, "alice")

    assert set(deltas) == {"car-01", "car-02"} and seconds > 0
    one, two = deltas["car-01"], deltas["car-02"]
    assert (one.partition, one.replica, one.count) == (0, "alice", len(car1))
    assert one.seqs == SeqRanges.of([(0, 11), (16, 39)])
    order = [s for c, _, s in arrivals if c == "car-01"]
    expected_late = {s for i, s in enumerate(order) if s < max(order[:i], default=-1)}
    assert one.late == SeqRanges.of_seqs(expected_late) and len(one.late) > 0
    assert sum(one.deliveries.values()) == len(car1)
    assert one.deliveries.get(2, 0) == sum(1 for d, (c, _, s) in zip(deliveries, arrivals,
                                                                      strict=True)
                                           if d == 2 and c == "car-01")
    speeds = [orjson.loads(message("car-01", s))["speed_kmh"] for s in car1]
    assert one.fields["speed_kmh"].count == len(car1)
    assert one.fields["speed_kmh"].sum == pytest.approx(sum(speeds))
    assert sum(w.count for w in one.windows.values()) == len(car1)
    assert (two.partition, two.count, two.seqs) == (2, 25, SeqRanges.of([(0, 24)]))
    assert two.late == SeqRanges() and two.deliveries == {1: 25}
