"""The observer on a real three-node cluster: brokers, leaders and ISRs; a node SIGKILLed and
started again, seen from the metadata alone (no knowledge of how the cluster was started)."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic

from backend.broker.nodes import EmbeddedCluster
from backend.contracts import ClusterEventType as T
from backend.contracts import Snapshot
from backend.netutil import wait_until
from backend.observer.observer import Observer

PARTITIONS = 6


def poll_until(observer: Observer, check, timeout: float, what: str) -> Snapshot:
    """Poll the observer until `check(snapshot)` holds; the snapshot that satisfied it."""
    def once() -> Snapshot | None:
        snap = observer.poll_once()
        return snap if snap.error is None and check(snap) else None
    return wait_until(once, timeout, interval=0.3, what=what)


def test_observer_sees_a_killed_broker_leaders_move_isr_shrink_and_recover(
        cluster3: EmbeddedCluster, unique: str) -> None:
    settings = cluster3.settings
    topic, group = f"rf3-{unique}", f"rf3-group-{unique}"
    admin = AdminClient(settings.client_config())
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(60)
    observer = Observer(settings, group, topic, tail_events=False, exact_lag=False,
                        read_generation=False, sample_every=3600)
    try:
        snap = poll_until(observer, lambda s: all(len(p.isr) == 3 for p in s.partitions)
                          and len(s.partitions) == PARTITIONS, 60, "three in-sync replicas")
        assert [(b.broker_id, b.up) for b in snap.brokers] == [(1, True), (2, True), (3, True)]
        assert {b.address for b in snap.brokers} == {
            f"127.0.0.1:{n.port}" for n in cluster3.nodes.values()}
        assert all(set(p.replicas) == set(p.isr) == {1, 2, 3} for p in snap.partitions)
        assert sum(b.leaders for b in snap.brokers) == PARTITIONS
        assert snap.under_replicated == snap.offline_partitions == 0

        # kill the leader of partition 0 (any node: a quorum of two remains)
        victim = next(p.leader for p in snap.partitions if p.partition == 0)
        assert victim is not None
        led = {p.partition for p in snap.partitions if p.leader == victim}
        killed_at = time.monotonic()
        cluster3.kill(victim)
        down = poll_until(observer, lambda s: all(victim not in p.isr for p in s.partitions),
                          30, f"broker {victim} out of every ISR")
        seen_after = time.monotonic() - killed_at
        gone = next(b for b in down.brokers if b.broker_id == victim)
        assert not gone.up and gone.leaders == 0 and gone.out_of_sync == PARTITIONS
        assert gone.address == f"127.0.0.1:{cluster3.nodes[victim].port}"  # seen before
        assert all(p.leader not in (None, victim) for p in down.partitions)
        assert all(len(p.isr) == 2 and p.under_replicated for p in down.partitions)
        assert down.under_replicated == PARTITIONS and down.offline_partitions == 0
        kinds = [(e.type, e.partition) for e in down.cluster_events]
        assert (T.BROKER_DOWN, None) in kinds
        assert {p for t, p in kinds if t == T.LEADER_CHANGED} >= led
        assert {p for t, p in kinds if t == T.ISR_SHRUNK} == set(range(PARTITIONS))
        assert all(e.brokers == (victim,) for e in down.cluster_events
                   if e.type in (T.BROKER_DOWN, T.ISR_SHRUNK))

        cluster3.start_node(victim)
        back = poll_until(observer, lambda s: all(len(p.isr) == 3 for p in s.partitions),
                          60, f"broker {victim} back in every ISR")
        assert all(b.up for b in back.brokers) and back.under_replicated == 0
        after = [e for e in back.cluster_events if e.ts > down.taken_ms]
        assert (T.BROKER_UP, (victim,)) in {(e.type, e.brokers) for e in after}
        assert {e.partition for e in after if e.type == T.ISR_EXPANDED} == set(range(PARTITIONS))
    finally:
        observer.stop()
    # a fenced broker is noticed after its session timeout; the observer within a poll of it
    assert seen_after < 20, seen_after
