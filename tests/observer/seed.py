"""Many consumer groups at once, for the overview's tests and its benchmark.

A group with committed offsets and no members is what most groups of a production cluster
look like most of the time (Empty); AlterConsumerGroupOffsets makes one per request without
a member ever joining, so a few thousand take seconds instead of a consumer per group.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterable, Mapping

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from backend.kafka.settings import KafkaSettings
from backend.observer.generation import offsets_partition

UNANSWERED = "no answer within the request's timeout"


def seed_groups(settings: KafkaSettings, commits: Mapping[str, Mapping[tuple[str, int], int]],
                in_flight: int = 64, timeout: float = 60.0, retry_for: float = 120.0) -> None:
    """Commit `commits[group][(topic, partition)] = offset` for every group, `in_flight` at
    a time. A request can succeed while single partitions carry an error, and a fresh
    broker answers NOT_COORDINATOR while its offsets topic is being created (once, on a
    fresh broker at load 30, for half the groups for over a minute: the cause is not known,
    and a failed test keeps its broker's log in test-artifacts): the groups that failed are
    sent again, with a growing pause, for up to `retry_for` seconds. A request unanswered
    for `timeout` counts as failed too, and the next round has a client of its own: once, a
    fresh SASL broker at load 14 left three requests unanswered for a minute. The error names
    the offsets partitions the failed groups live on, so that log can be read for them."""
    admin = AdminClient(settings.client_config())
    todo = list(commits)
    deadline = time.monotonic() + retry_for
    pause = 0.25
    while True:
        failed = _send(admin, commits, todo, in_flight, timeout)
        if not failed:
            return
        if any(reason == UNANSWERED for reason in failed.values()):
            admin = AdminClient(settings.client_config())
        if time.monotonic() + pause > deadline:
            raise RuntimeError(f"committing offsets failed for {len(failed)} groups "
                               f"(offsets partitions {_offsets_partitions(admin, failed)}): "
                               f"{next(iter(failed.values()))}")
        todo = sorted(failed)
        time.sleep(pause)  # a coordinator still loading needs a moment; nothing to wait on
        pause = min(pause * 2, 4.0)


def _offsets_partitions(admin: AdminClient, groups: Iterable[str]) -> list[int] | str:
    """Which partitions of `__consumer_offsets` the coordinator keeps `groups` on."""
    try:
        topic = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]
        count = len(topic.partitions)
    except (KafkaException, KeyError) as exc:
        return f"unknown: {exc}"
    return sorted({offsets_partition(g, count) for g in groups}) if count else "unknown"


def _send(admin: AdminClient, commits: Mapping[str, Mapping[tuple[str, int], int]],
          groups: list[str], in_flight: int, timeout: float) -> dict[str, str]:
    failed: dict[str, str] = {}
    todo = list(reversed(groups))
    pending: dict[concurrent.futures.Future, str] = {}
    while todo or pending:
        while todo and len(pending) < in_flight:
            group = todo.pop()
            tps = [TopicPartition(t, p, o) for (t, p), o in sorted(commits[group].items())]
            req = ConsumerGroupTopicPartitions(group, tps)
            pending[admin.alter_consumer_group_offsets([req], request_timeout=timeout)[group]] \
                = group
        done, _ = concurrent.futures.wait(pending, timeout=timeout,
                                          return_when=concurrent.futures.FIRST_COMPLETED)
        if not done:  # sent again, by the caller's next round, with the groups not sent yet
            failed.update(dict.fromkeys(pending.values(), UNANSWERED))
            failed.update(dict.fromkeys(todo, UNANSWERED))
            return failed
        for fut in done:
            group = pending.pop(fut)
            try:
                errors = [str(tp.error) for tp in fut.result().topic_partitions or ()
                          if tp.error is not None]
            except KafkaException as exc:
                errors = [str(exc)]
            if errors:
                failed[group] = errors[0]
    return failed
