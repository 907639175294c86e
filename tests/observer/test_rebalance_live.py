"""On the real broker: kill -9 one real member and read the rebalance off the timeline.

Done for the classic protocol (range assignor) and for the KIP-848 consumer protocol;
the observer must record exactly one rebalance with the killed member's partitions
moved from it to survivors, a duration, and the processing gap it caused.
"""

from __future__ import annotations

import pytest

from backend.netutil import wait_until
from backend.observer.observer import Observer
from tests.observer.conftest import create_topic

PARTITIONS = 6


def _settled(obs: Observer, n_members: int):
    snap = obs.latest()
    if snap is None or snap.error or obs.timeline.in_progress:
        return None
    if snap.state != "Stable" or len(snap.members) != n_members:
        return None
    if any(p.owner is None for p in snap.partitions) or len(snap.partitions) != PARTITIONS:
        return None
    if any(m.target_partitions is not None and set(m.target_partitions) != set(m.partitions)
           for m in snap.members):
        return None
    if any(p.committed is None for p in snap.partitions):
        return None
    if snap.generation is None:  # readable here: the broker has no ACLs
        return None
    return snap


@pytest.mark.timeout(180)
@pytest.mark.parametrize("protocol,assignor", [("classic", "range"), ("consumer", None)])
def test_kill_one_member_records_one_rebalance(kafka, unique, members_factory,
                                               producer_factory, protocol, assignor):
    topic, group = f"obs-kill-{unique}", f"obs-kill-{protocol}-{unique}"
    create_topic(kafka, topic, PARTITIONS)
    producer_factory(topic, rate=60.0)
    members = members_factory(group, topic, protocol, assignor)
    for name in ("m-a", "m-b", "m-c"):
        members.start(name)

    observer = Observer(kafka, group, topic=topic, interval=0.5, tail_events=False)
    observer.start()
    try:
        # settled, and at the same generation a whole poll later: the generation is read
        # from __consumer_offsets, which can lag the members' description by a poll (a
        # loaded machine saw the last join's generation arrive after the owners had)
        seen: list[int | None] = []

        def settled_at_one_generation():
            snap = _settled(observer, 3)
            seen.append(None if snap is None else snap.generation)
            return snap if snap is not None and seen[-3:] == [snap.generation] * 3 else None

        before = wait_until(settled_at_one_generation, timeout=60, interval=0.5,
                            what="3 members owning every partition, one generation")
        assert before.protocol == protocol
        assert before.state == "Stable"  # KIP-848 groups are live, not dead
        baseline = len(before.rebalances)
        owned_by_b = {p.partition for p in before.partitions if p.owner == "m-b"}
        assert owned_by_b, "m-b should own something before the kill"

        members.kill("m-b")

        def recovered():
            snap = _settled(observer, 2)
            if snap is None or len(snap.rebalances) <= baseline:
                return None
            return snap

        after = wait_until(recovered, timeout=60, what="the group to settle without m-b")
        new = after.rebalances[baseline:]
        assert len(new) == 1, new
        rb = new[0]
        assert rb.left == ("m-b",)
        assert rb.joined == ()
        assert rb.end_ms is not None and rb.end_ms >= rb.start_ms
        # the generation / epoch, read from __consumer_offsets on this open broker, moved;
        # it may reach the observer a poll after the owners did: still the same rebalance
        assert before.generation is not None
        assert rb.previous_generation == before.generation
        newer = wait_until(lambda: (s := observer.latest()).generation is not None
                           and s.generation > before.generation and s,
                           timeout=20, what="the new generation")
        same = [r for r in newer.rebalances if r.start_ms == rb.start_ms]
        assert len(newer.rebalances) == baseline + 1 and same
        assert same[0].generation == newer.generation
        moved = {p: (src, dst) for p, src, dst in rb.moved}
        assert owned_by_b <= set(moved)
        for p in owned_by_b:
            assert moved[p][0] == "m-b"
            assert moved[p][1] in ("m-a", "m-c")
        owners_after = {p.partition: p.owner for p in after.partitions}
        for p, (_src, dst) in moved.items():
            assert owners_after[p] == dst
        # the partitions m-b owned are processed again: the gap gets measured
        def gap():
            snap = observer.latest()
            mine = [r for r in snap.rebalances if r.start_ms == rb.start_ms]
            return mine and mine[0].gap_ms
        gap_ms = wait_until(gap, timeout=30, what="the processing gap")
        # the crash is noticed after the session timeout (6 s on both protocols here)
        assert 3000 <= gap_ms <= 40000
        # and still exactly one rebalance for one kill
        assert len(observer.latest().rebalances) == baseline + 1
    finally:
        observer.stop()
