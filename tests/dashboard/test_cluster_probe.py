"""The Status page's cluster check on the real broker, read through the Kafka reader: the
brokers, every topic with its partitions' placements, every group with its type; a stopped
cluster is one line at once; the reader's JVM goes with the poller that held it."""

from __future__ import annotations

import time

import pytest

from backend.kafka.settings import ClusterUnreachable
from backend.netutil import free_port
from dashboard.checks import ClusterProbe, ClusterTarget
from tests.observer.conftest import create_topic
from tests.observer.seed import seed_groups


def test_the_probe_lists_brokers_topics_and_groups_through_the_reader(kafka, unique) -> None:
    topic, group = f"probe-{unique}", f"probe-g-{unique}"
    create_topic(kafka, topic, 3)
    seed_groups(kafka, {group: {(topic, p): 0 for p in range(3)}})
    probe = ClusterProbe(ClusterTarget(kafka.bootstrap))
    try:
        ov = probe()
        assert ov.brokers == 1 and ov.bootstrap == kafka.bootstrap
        assert next(t for t in ov.topics if t.name == topic).partitions == 3
        assert not next(t for t in ov.topics if t.name == topic).internal
        assert all(t.internal for t in ov.topics if t.name.startswith("__"))
        mine = next(g for g in ov.groups if g.group_id == group)
        # offsets committed by a client that never joined: a simple classic group, Empty
        assert (mine.state, mine.type, mine.simple) == ("Empty", "classic", True)
        assert [b.broker_id for b in ov.broker_views] == [1]
        assert (ov.under_replicated, ov.offline_partitions) == (0, 0)
        reader_jvm = probe._reader.gateway.pid if probe._reader else None
        assert reader_jvm is not None
    finally:
        probe.close()
    assert probe._reader is None
    with pytest.raises(ClusterUnreachable, match="stopped"):
        probe()  # a probe still running as its poller was released opens nothing again


def test_a_stopped_cluster_is_one_line_at_once() -> None:
    probe = ClusterProbe(ClusterTarget(f"127.0.0.1:{free_port()}"))
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable) as info:
        probe()
    assert time.monotonic() - started < 3.0
    assert "refused the connection" in str(info.value) and "\n" not in str(info.value)
    assert probe._reader is None  # nothing started for a cluster that is not there
    probe.close()
