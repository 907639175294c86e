"""The shared reading of DescribeConsumerGroups: names, protocol and owned partitions."""

from __future__ import annotations

from types import SimpleNamespace as NS

from confluent_kafka import ConsumerGroupState, ConsumerGroupType, TopicPartition

from backend.contracts import CLASSIC, CONSUMER, GROUP_TYPES, SHARE, group_type
from backend.kafka.groups import description_from, state_name


def _member(client: str, parts: list[tuple[str, int]], target=None) -> NS:
    tps = [TopicPartition(t, p) for t, p in parts]
    return NS(member_id=f"id-{client}", client_id=client, host="/127.0.0.1",
              assignment=NS(topic_partitions=tps), group_instance_id=None,
              target_assignment=None if target is None
              else NS(topic_partitions=[TopicPartition(t, p) for t, p in target]))


def test_state_names_are_kafkas_own() -> None:
    assert state_name(ConsumerGroupState.PREPARING_REBALANCING) == "PreparingRebalance"
    assert state_name(ConsumerGroupState.STABLE) == "Stable"
    assert state_name("DEAD") == "Dead"
    assert state_name("ASSIGNING") == "Assigning"  # unknown names are title-cased, not lost


def test_description_sorts_members_and_filters_partitions_by_topic() -> None:
    desc = NS(members=[_member("b", [("t", 3), ("u", 0), ("t", 1)]), _member("a", [])],
              type=NS(name="CLASSIC"), state=ConsumerGroupState.STABLE,
              partition_assignor="range")
    d = description_from("g", desc)
    assert (d.state, d.protocol, d.assignor) == ("Stable", "classic", "range")
    assert d.client_ids == ["a", "b"]
    b = d.members[1]
    assert b.partitions("t") == (1, 3) and b.partitions() == (0, 1, 3)
    assert d.members[0].partitions("t") == () and d.members[0].target is None


def test_a_kip848_group_moving_partitions_is_reconciling_not_unknown() -> None:
    desc = NS(members=[_member("a", [("t", 0)], target=[("t", 0), ("t", 1)])],
              type=NS(name="CONSUMER"), state=NS(name="UNKNOWN"), partition_assignor="")
    d = description_from("g", desc)
    assert (d.state, d.protocol, d.assignor) == ("Reconciling", "consumer", None)
    assert d.members[0].target == (("t", 0), ("t", 1))


def test_group_types_are_parsed_into_the_contract_s_words() -> None:
    assert [group_type(t) for t in ConsumerGroupType] == [None, CONSUMER, CLASSIC]
    assert [group_type(word.upper()) for word in GROUP_TYPES] == list(GROUP_TYPES)
    assert group_type("Share") == SHARE and group_type(None) is None
    for kind, protocol in ((ConsumerGroupType.CONSUMER, CONSUMER),
                           (ConsumerGroupType.CLASSIC, CLASSIC),
                           (ConsumerGroupType.UNKNOWN, CLASSIC),  # a broker before KIP-848
                           (None, CLASSIC)):
        desc = NS(members=[], type=kind, state=ConsumerGroupState.EMPTY, partition_assignor="")
        assert description_from("g", desc).protocol == protocol
