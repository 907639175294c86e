"""The collector's metadata against the real broker: the watched topic's is read every poll
(it carries leaders, replicas and ISRs), other topics' counts are cached, and a topic grown
since is seen at the very next poll that meets one of its new partitions."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka.admin import AdminClient, NewPartitions

from backend.observer.collect import Collector
from tests.observer.conftest import create_topic
from tests.observer.seed import seed_groups


def count_metadata_requests(collector: Collector) -> Callable[[], int]:
    """Wrap the collector's reader so its metadata requests can be counted."""
    client = collector.reader
    original = client.topics
    calls = [0]

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    client.topics = counting  # type: ignore[method-assign]
    return lambda: calls[0]


def test_other_topics_counts_are_cached_the_watched_one_is_read_each_poll_with_its_brokers(
        kafka, unique):
    other, watched = f"collect-{unique}", f"collect-big-{unique}"
    group = f"collect-group-{unique}"
    create_topic(kafka, other, 2)
    create_topic(kafka, watched, 4)
    seed_groups(kafka, {group: {**{(other, p): 0 for p in range(2)},
                                **{(watched, p): 0 for p in range(4)}}})
    collector = Collector(kafka)
    try:
        requests = count_metadata_requests(collector)
        for _ in range(3):
            obs = collector.collect(group)
            assert obs.partition_counts == {other: 2, watched: 4}
        # the first poll reads both in one request; then only the watched topic (most
        # partitions), once a poll
        assert requests() == 1 + 1 + 1
        # that one request is also the broker view: who is up, who leads, who is in sync
        assert obs.watched == watched
        assert obs.live_brokers == {1: kafka.bootstrap}
        assert sorted(obs.placements) == [0, 1, 2, 3]
        assert all(pl.leader == 1 and pl.replicas == (1,) and pl.isr == (1,)
                   for pl in obs.placements.values())

        # partitions added to the other topic, and the group commits on the new one (a
        # rebalance onto it): seen at once, though its count was cached
        admin = AdminClient(kafka.client_config())
        admin.create_partitions([NewPartitions(other, 3)])[other].result(30)
        seed_groups(kafka, {group: {(other, p): 0 for p in range(3)}})
        obs = collector.collect(group)
        assert obs.partition_counts == {other: 3, watched: 4}
        assert {p for t, p in obs.end_offsets if t == other} == {0, 1, 2}
        assert requests() == 3 + 2
    finally:
        collector.close()
