"""The collector against a scripted admin client: no broker, just the calls a poll makes."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from confluent_kafka import TopicPartition

from backend.cluster.settings import KafkaSettings
from backend.observer import collect
from backend.observer.collect import Collector


class _Done:
    def __init__(self, value: object) -> None:
        self.value = value

    def result(self, timeout: float | None = None) -> object:
        return self.value


class FakeAdmin:
    """One group on one topic; the test sets the partition count and the members' assignment."""

    def __init__(self, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.assignment: dict[str, list[int]] = {}
        self.metadata_requests = 0

    def describe_consumer_groups(self, groups, request_timeout=None):
        members = [SimpleNamespace(
            member_id=f"{name}-id", client_id=name, host="/127.0.0.1", group_instance_id=None,
            target_assignment=None,
            assignment=SimpleNamespace(topic_partitions=[TopicPartition(self.topic, p)
                                                         for p in parts]))
            for name, parts in self.assignment.items()]
        desc = SimpleNamespace(members=members, state="STABLE", type=None,
                               partition_assignor="range")
        return {g: _Done(desc) for g in groups}

    def list_consumer_group_offsets(self, requests, request_timeout=None):
        return {r.group_id: _Done(SimpleNamespace(topic_partitions=[])) for r in requests}

    def list_topics(self, topic=None, timeout=None):
        self.metadata_requests += 1
        meta = SimpleNamespace(error=None, partitions=dict.fromkeys(range(self.partitions)))
        return SimpleNamespace(topics={self.topic: meta})

    def list_offsets(self, requests, request_timeout=None):
        return {tp: _Done(SimpleNamespace(offset=0)) for tp in requests}


def _collector(admin: FakeAdmin, monkeypatch, listener: socket.socket) -> Collector:
    monkeypatch.setattr(collect, "AdminClient", lambda conf: admin)
    host, port = listener.getsockname()
    return Collector(KafkaSettings(bootstrap=f"{host}:{port}"))


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A port that accepts connections, so the collector's refused-port probe passes."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


def test_a_topic_grown_within_the_metadata_cache_age_is_seen_at_the_next_poll(
        monkeypatch, listener):
    admin = FakeAdmin("telemetry", 2)
    admin.assignment = {"ada": [0], "bruno": [1]}
    collector = _collector(admin, monkeypatch, listener)
    assert collector.collect("g").partition_counts == {"telemetry": 2}
    assert collector.collect("g").partition_counts == {"telemetry": 2}
    assert admin.metadata_requests == 1  # the count is cached between polls

    admin.partitions = 4  # partitions added; the group rebalances onto them
    admin.assignment = {"ada": [0, 2], "bruno": [1, 3]}
    obs = collector.collect("g")
    assert obs.partition_counts == {"telemetry": 4}
    assert {p for _, p in obs.end_offsets} == {0, 1, 2, 3}
    assert admin.metadata_requests == 2


def test_a_group_within_the_cached_count_costs_no_metadata_request(monkeypatch, listener):
    admin = FakeAdmin("telemetry", 3)
    admin.assignment = {"ada": [0, 1, 2]}
    collector = _collector(admin, monkeypatch, listener)
    for _ in range(3):
        assert collector.collect("g", "telemetry").partition_counts == {"telemetry": 3}
    assert admin.metadata_requests == 1
