"""A real three-node KRaft cluster: topics with three copies, a node killed and started again,
the controller quorum's leader killed, and the ways a cluster refuses to start.

The session's cluster (`cluster3`) serves the tests that leave it whole; the start-up failures
run on private clusters, each checked to leave no process behind.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from pathlib import Path

import psutil
import pytest
from confluent_kafka import Consumer, Producer

from backend.broker.nodes import ClusterError, EmbeddedCluster, cluster_nodes
from backend.kafka.clients import quiet_admin
from backend.kafka.clusterfile import CLUSTER_FILE
from backend.kafka.topics import ensure_topics
from backend.netutil import PortBusyError, free_port, wait_until


def java_children() -> set[int]:
    """The JVMs this test process has started and still runs."""
    return {p.pid for p in psutil.Process().children(recursive=True)
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE and "java" in p.name()}


def round_trip(cluster: EmbeddedCluster, topic: str, n: int = 50) -> None:
    """Produce n records with acks=all and read them all back: the cluster takes writes."""
    producer = Producer(cluster.settings.client_config(**{"acks": "all",
                                                          "enable.idempotence": True}))
    for i in range(n):
        producer.produce(topic, key=b"k", value=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer(cluster.settings.client_config(**{
        "group.id": f"rt-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    seen: list[bytes] = []
    try:
        wait_until(lambda: seen.extend(m.value() for m in consumer.consume(100, 0.5)
                                       if m.error() is None) or len(seen) >= n, 60,
                   what=f"{n} records read back from {topic}")
    finally:
        consumer.close()


def test_stack_topics_get_three_copies_two_in_sync(cluster3: EmbeddedCluster,
                                                    unique: str) -> None:
    layout = ensure_topics(cluster3.settings, group=f"g-{unique}", topic=f"t-{unique}")
    for info in layout.all:
        assert info.replication == 3, info
        assert info.config.get("min.insync.replicas") == "2", info
    brokers = quiet_admin(cluster3.settings).list_topics(timeout=10).brokers
    assert sorted(brokers) == [1, 2, 3]
    written = json.loads((cluster3.data_dir / CLUSTER_FILE).read_text())
    assert written["brokers"] == 3 and written["bootstrap"] == cluster3.bootstrap
    nodes, leader = cluster_nodes(cluster3.data_dir)
    assert [(n.id, n.alive, n.controller) for n in nodes] == [(1, True, True), (2, True, True),
                                                              (3, True, True)]
    assert leader in (1, 2, 3)


def test_killing_the_quorum_leader_elects_another_and_the_cluster_carries_on(
        cluster3: EmbeddedCluster, unique: str) -> None:
    topic = f"q-{unique}"
    ensure_topics(cluster3.settings, group=f"g-{unique}", topic=topic)
    leader = cluster3.quorum_leader()
    assert leader is not None
    killed = time.monotonic()
    cluster3.kill(leader)
    try:
        new = wait_until(lambda: (lambda n: n if n not in (None, leader) else None)(
            cluster3.quorum_leader()), 30, interval=0.2, what="a new quorum leader")
        print(f"\nquorum leader {leader} killed; {new} elected after "
              f"{time.monotonic() - killed:.1f} s")
        round_trip(cluster3, topic)  # two of three nodes: writes with acks=all still land
        assert not cluster3.info(leader).alive
    finally:
        # a wait far shorter than a restart takes (a presenter's Start on a loaded laptop):
        # the node is left running, not stopped, and comes back on its own
        cluster3.start_node(leader, timeout=0.5)
    assert cluster3.info(leader).alive
    wait_until(lambda: sorted(quiet_admin(cluster3.settings).list_topics(timeout=5).brokers)
               == [1, 2, 3], 60, what="the restarted node registered again")


@pytest.fixture
def cluster_root(tmp_path: Path) -> Path:
    """Where a test starts an EmbeddedCluster of its own: its nodes are JVMs, so the test is
    a `broker` test (tests/markers.py), even when it expects them to stop at once."""
    return tmp_path / "c"


def test_a_port_taken_by_one_node_is_one_line_and_starts_nothing(cluster_root: Path) -> None:
    before = java_children()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        cluster = EmbeddedCluster(cluster_root, brokers=3)
        node2 = cluster.nodes[2]
        node2.port = busy.getsockname()[1]
        with pytest.raises(PortBusyError) as info:
            cluster.start(timeout=60)
    finally:
        busy.close()
    message = str(info.value)
    assert "\n" not in message and "Kafka broker 2" in message and str(node2.port) in message
    assert java_children() == before


def test_a_node_formatted_for_another_cluster_is_refused_before_anything_starts(
        tmp_path: Path) -> None:
    root = tmp_path / "c"
    for node_id, cluster_id in ((1, "AAAAAAAAAAAAAAAAAAAAAA"), (2, "BBBBBBBBBBBBBBBBBBBBBB")):
        meta = root / f"node-{node_id}" / "logs" / "meta.properties"
        meta.parent.mkdir(parents=True)
        meta.write_text(f"cluster.id={cluster_id}\nnode.id={node_id}\nversion=1\n")
    before = java_children()
    with pytest.raises(ClusterError) as info:
        EmbeddedCluster(root, brokers=3)
    message = str(info.value)
    assert "\n" not in message and "different clusters" in message and str(root) in message
    assert java_children() == before


def test_a_node_killed_while_the_cluster_starts_stops_the_others(cluster_root: Path) -> None:
    before = java_children()
    cluster = EmbeddedCluster(cluster_root, brokers=3, port=free_port())
    node3 = cluster.nodes[3]
    original = node3.launch

    def launch_then_die(config: Path) -> None:
        original(config)
        assert node3.process is not None
        node3.process.kill()  # dies before the cluster is ready

    node3.launch = launch_then_die  # type: ignore[method-assign]
    with pytest.raises(Exception) as info:
        cluster.start(timeout=60)
    assert "node 3" in str(info.value).splitlines()[0]
    wait_until(lambda: java_children() == before, 30, what="every node stopped")
