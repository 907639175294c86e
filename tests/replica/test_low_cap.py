"""A real replica under a cap too low to wait out quietly (under 2 msg/s): between tokens it
pauses its assignment and polls on, and the pause must neither outlive the wait nor keep the
member from following a rebalance (librdkafka keeps a pause across one: see PauseBook).

The group gets a backlog on six partitions; `slow` (capped) takes them all, then `fast`
(uncapped) joins. The rebalance must complete with the capped member paused most of the
time, `fast` must drain its half, and `slow` must keep taking records on its half, at no
more than its cap.
"""

from __future__ import annotations

import time

import pytest

from backend.contracts import Snapshot
from backend.observer.observer import Observer
from tests.replica.harness import ContractProducer

CAP = 1.0  # msg/s
WINDOW_S = 15.0


def _members(observer: Observer, names: set[str]) -> Snapshot | None:
    """Stable with `names`, each owning partitions, and slow having committed something."""
    snap = observer.latest()
    if snap is None or snap.error or snap.state != "Stable":
        return None
    if {m.client_id for m in snap.members} != names or any(not m.partitions
                                                            for m in snap.members):
        return None
    return snap if _committed(snap, "slow") > 0 else None


def _committed(snap: Snapshot, owner: str) -> int:
    return sum(p.committed or 0 for p in snap.partitions if p.owner == owner)


@pytest.mark.timeout(300)
def test_a_tiny_cap_pauses_between_tokens_and_still_follows_a_rebalance(
        kafka, layout, events, fleet) -> None:
    group, topic = layout
    producer = ContractProducer(kafka, topic, streams=12)
    for _ in range(20):  # a backlog of 240 records, 40 a partition
        producer.produce_one_round()
    producer.stop()
    observer = Observer(kafka, group, topic=topic, interval=0.5, tail_events=False,
                        read_generation=False).start()
    try:
        fleet.start("slow", "--max-rate", str(CAP))
        fleet.wait(lambda: _members(observer, {"slow"}), 120, "slow owning and committing")
        fleet.start("fast")
        split = fleet.wait(lambda: _members(observer, {"slow", "fast"}), 120,
                           "the rebalance to give fast a share")
        fast_parts = {p.partition for p in split.partitions if p.owner == "fast"}

        def fast_drained() -> bool:
            snap = observer.latest()
            return bool(snap) and all(p.committed == p.end for p in snap.partitions
                                      if p.partition in fast_parts)

        fleet.wait(fast_drained, 60, "fast through its backlog")
        start = observer.latest()
        assert start is not None and _committed(start, "slow") < 120  # slow is still behind
        t0 = time.monotonic()
        fleet.wait(lambda: time.monotonic() - t0 >= WINDOW_S, WINDOW_S + 5, "a window")
        end = observer.latest()
        assert end is not None and {p.owner for p in end.partitions} == {"slow", "fast"}
        rate = (_committed(end, "slow") - _committed(start, "slow")) / (
            (end.taken_ms - start.taken_ms) / 1000)
        print(f"\nslow under a {CAP:g} msg/s cap: {rate:.2f} msg/s")
        assert 0.2 <= rate <= CAP * 1.3, rate  # moving, and within its cap
        beats = events.of("heartbeat", replica="slow")
        assert beats and beats[-1]["max_rate"] == CAP and beats[-1]["partitions"]
    finally:
        observer.stop()
