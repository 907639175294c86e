"""ensure_topics / add_partitions against the real embedded broker."""

from __future__ import annotations

import pytest

from backend.contracts import dead_letter_topic, events_topic, summaries_topic
from backend.kafka.settings import KafkaSettings
from backend.kafka.topics import (
    TopicError,
    add_partitions,
    ensure_input_topic,
    ensure_topics,
)


def test_ensure_topics_creates_all_four_with_their_configs(kafka: KafkaSettings,
                                                           unique: str) -> None:
    group, topic = f"grp-{unique}", f"tel-{unique}"
    layout = ensure_topics(kafka, group=group, topic=topic, partitions=5)
    assert [t.name for t in layout.all] == [topic, events_topic(group), summaries_topic(group),
                                            dead_letter_topic(group)]
    assert all(t.created for t in layout.all)
    assert layout.input.partitions == 5
    assert layout.summaries.partitions == layout.input.partitions
    assert layout.summaries.config["cleanup.policy"] == "compact"
    assert layout.events.config["cleanup.policy"] == "delete"
    assert layout.dead_letters.config["cleanup.policy"] == "delete"
    assert all(t.replication == 1 for t in layout.all)


def test_ensure_topics_is_idempotent_and_keeps_existing_counts(kafka: KafkaSettings,
                                                               unique: str) -> None:
    group, topic = f"grp-{unique}", f"tel-{unique}"
    first = ensure_topics(kafka, group=group, topic=topic, partitions=3)
    again = ensure_topics(kafka, group=group, topic=topic, partitions=8)
    assert not any(t.created for t in again.all)
    assert again.input.partitions == 3  # an existing topic is never resized by ensure
    assert again.summaries.partitions == 3
    assert [t.config for t in again.all] == [t.config for t in first.all]


def test_changelog_follows_the_input_when_the_input_grew(kafka: KafkaSettings,
                                                         unique: str) -> None:
    group, topic = f"grp-{unique}", f"tel-{unique}"
    ensure_topics(kafka, group=group, topic=topic, partitions=2)
    grown = add_partitions(kafka, topic, 4)
    assert grown.partitions == 4
    layout = ensure_topics(kafka, group=group, topic=topic)
    assert layout.input.partitions == layout.summaries.partitions == 4


def test_add_partitions_is_idempotent_and_refuses_to_shrink(kafka: KafkaSettings,
                                                            unique: str) -> None:
    topic = f"tel-{unique}"
    ensure_input_topic(kafka, topic, partitions=2)
    assert add_partitions(kafka, topic, 6).partitions == 6
    assert add_partitions(kafka, topic, 6).partitions == 6
    with pytest.raises(TopicError, match="cannot reduce it to 3"):
        add_partitions(kafka, topic, 3)
    with pytest.raises(TopicError, match="does not exist"):
        add_partitions(kafka, f"missing-{unique}", 3)


def test_replication_factor_too_high_is_a_clear_error(kafka: KafkaSettings,
                                                      unique: str) -> None:
    with pytest.raises(TopicError) as info:
        ensure_topics(kafka, group=f"grp-{unique}", topic=f"tel-{unique}", replication=3)
    message = str(info.value)
    assert "\n" not in message
    assert f"tel-{unique}" in message and "REPLICATION" in message.upper()


def test_bad_counts_are_rejected_before_asking_the_broker(kafka: KafkaSettings,
                                                          unique: str) -> None:
    with pytest.raises(TopicError, match="at least 1"):
        ensure_topics(kafka, topic=f"tel-{unique}", partitions=0)


def test_a_changelog_that_is_not_compacted_is_refused(kafka: KafkaSettings,
                                                      unique: str) -> None:
    group, topic = f"grp-{unique}", f"tel-{unique}"
    ensure_input_topic(kafka, summaries_topic(group), partitions=2)  # plain delete policy
    with pytest.raises(TopicError, match="must be compacted"):
        ensure_topics(kafka, group=group, topic=topic, partitions=2)
