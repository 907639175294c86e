"""Kafka's own words for group states and types, whatever client spelt them."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupState, ConsumerGroupType

from backend.contracts import CLASSIC, CONSUMER, GROUP_TYPES, SHARE, group_type
from backend.kafka.groups import same_tp, state_name


def test_state_names_are_kafkas_own() -> None:
    assert state_name(ConsumerGroupState.PREPARING_REBALANCING) == "PreparingRebalance"
    assert state_name(ConsumerGroupState.STABLE) == "Stable"
    assert state_name("DEAD") == "Dead"
    assert state_name("ASSIGNING") == "Assigning"  # unknown names are title-cased, not lost


def test_group_types_are_parsed_into_the_contract_s_words() -> None:
    assert [group_type(t) for t in ConsumerGroupType] == [None, CONSUMER, CLASSIC]
    assert [group_type(word.upper()) for word in GROUP_TYPES] == list(GROUP_TYPES)
    assert group_type("Share") == SHARE and group_type(None) is None


def test_a_partition_read_twice_is_one_object():
    first = same_tp("orders", 3)
    again = same_tp("".join(["ord", "ers"]), 3)  # an equal string, not the same object
    assert again == ("orders", 3) and again is first
    assert same_tp("orders", 4) is not first
