"""Static membership on the real broker, with both group protocols: the consumer settings
GroupChoice makes for a static replica (`group.instance.id`) let a member close and come back
within the session timeout without the group rebalancing.

Plain confluent-kafka members here, so the check is quick and about membership alone; the
supervisor's restart of a real static replica is tests/supervisor/test_static_restart.py.
This is also the evidence that librdkafka (2.12 and later) takes `group.instance.id` with
the KIP-848 consumer protocol, so `--static` is offered for both protocols.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import Consumer

from backend.netutil import wait_until
from backend.observer.generation import GenerationTail
from backend.replica.membership import GroupChoice
from tests.dashboard.group import create_topic
from tests.supervisor.conftest import _reader

PARTITIONS = 2


class StaticMember:
    """A static group member polling on its own thread; counts the rebalance callbacks that
    reach it, so a test can tell that nothing moved."""

    def __init__(self, settings: Any, group: str, topic: str, name: str,
                 choice: GroupChoice) -> None:
        self.name = name
        self.changes: list[tuple[str, tuple[int, ...]]] = []
        self.consumer = Consumer(settings.client_config(**{
            "group.id": group, "client.id": name, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, **choice.consumer_properties(name)}))
        self.consumer.subscribe([topic], on_assign=self._on("assigned"),
                                on_revoke=self._on("revoked"), on_lost=self._on("lost"))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on(self, kind: str) -> Any:
        def callback(_consumer: Consumer, partitions: list[Any]) -> None:
            self.changes.append((kind, tuple(sorted(tp.partition for tp in partitions))))
        return callback

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.1)

    def close(self) -> None:
        """A graceful close: a static member does not leave the group by it."""
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def _owners(kafka: Any, group: str, topic: str) -> dict[str, tuple[tuple[int, ...], str]]:
    """client id -> (its partitions, member id), once the group is settled with two members
    that own a partition each; {} before."""
    view = _reader(kafka).describe_group(group)
    if view.state != "Stable" or len(view.members) != PARTITIONS:
        return {}
    owned = {m.client_id: (m.partitions(topic), m.member_id) for m in view.members}
    if sorted(p for parts, _ in owned.values() for p in parts) != list(range(PARTITIONS)):
        return {}
    if any(len(parts) != 1 for parts, _ in owned.values()):
        return {}
    return owned


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.timeout(180)
def test_a_static_member_back_in_time_gets_its_partition_without_a_rebalance(
        kafka, unique: str, protocol: str) -> None:
    group, topic = f"static-{protocol}-{unique}", f"static-{protocol}-{unique}"
    create_topic(kafka, topic, PARTITIONS)
    choice = GroupChoice.parse(protocol, None)
    members = {n: StaticMember(kafka, group, topic, n, choice) for n in ("ada", "bruno")}
    tail = GenerationTail(kafka, group)
    try:
        before = wait_until(lambda: _owners(kafka, group, topic), 60, interval=0.25,
                            what="ada and bruno owning a partition each")
        generation = wait_until(tail.current, 30, interval=0.25, what="the group's generation")
        assert _reader(kafka).describe_group(group).protocol == protocol
        bruno_seen = len(members["bruno"].changes)

        members["ada"].close()  # no LeaveGroup: ada stays a member until the session ends
        assert _reader(kafka).describe_group(group).client_ids == ["ada", "bruno"]
        members["ada"] = StaticMember(kafka, group, topic, "ada", choice)

        def back() -> dict[str, tuple[tuple[int, ...], str]]:
            owned = _owners(kafka, group, topic)
            new_ada = owned.get("ada", ((), before["ada"][1]))[1] != before["ada"][1]
            return owned if new_ada and members["ada"].changes else {}

        after = wait_until(back, 30, interval=0.25, what="ada back under a new member id")
        assert after["ada"][0] == before["ada"][0] and after["bruno"] == before["bruno"]
        assert members["ada"].changes == [("assigned", before["ada"][0])]
        assert members["bruno"].changes[bruno_seen:] == []  # nothing reached bruno
        assert tail.current() == generation, "the group's generation moved"
    finally:
        for m in members.values():
            m.close()
        tail.close()
