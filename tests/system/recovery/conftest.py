"""Fixtures for restart tests: processes the test owns (and stops), never the shared ones."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from backend.kafka.settings import KafkaSettings
from backend.observer.derive import lag_messages
from tests.replica.harness import ReplicaFleet


@pytest.fixture
def replica_fleet_factory(tmp_path: Path, artifacts_dir: Path,
                          request: pytest.FixtureRequest) -> Iterator:
    """ReplicaFleet objects that are closed (SIGTERM, then SIGKILL) whatever happens."""
    fleets: list[ReplicaFleet] = []

    def make(settings: KafkaSettings, spark_remote: str, group: str, topic: str) -> ReplicaFleet:
        log_dir = tmp_path / f"replicas-{len(fleets)}"
        log_dir.mkdir()
        fleet = ReplicaFleet(settings, spark_remote, group, topic, log_dir)
        fleets.append(fleet)
        return fleet

    try:
        yield make
    finally:
        for fleet in fleets:
            fleet.close()
        # keep the replica logs where a failed run can be read (tmp_path is pruned)
        keep = artifacts_dir / "recovery" / request.node.name
        for fleet in fleets:
            shutil.copytree(fleet.log_dir, keep / fleet.log_dir.name, dirs_exist_ok=True)


def committed_offsets(settings: KafkaSettings, group: str, topic: str,
                      partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (-1001 = none yet), asked of the broker."""
    c = Consumer(settings.client_config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def drained(settings: KafkaSettings, group: str, topic: str, partitions: int) -> bool:
    """No partition has lag, by the observer's own lag maths: a partition nobody ever committed
    counts from its log start, so an empty one is drained, not pending forever."""
    committed = committed_offsets(settings, group, topic, partitions)
    c = Consumer(settings.client_config(**{"group.id": f"{group}-probe",
                                           "enable.auto.commit": False}))
    try:
        for p in range(partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            position = committed.get(p, -1)
            if lag_messages(position if position >= 0 else None, hi, lo) > 0:
                return False
        return True
    finally:
        c.close()


def summaries_now(settings: KafkaSettings, group: str) -> dict[str, dict]:
    """Summaries for a wait loop: a just-created changelog may briefly have no leader."""
    from confluent_kafka import KafkaException

    from tests.replica.harness import read_summaries

    try:
        return read_summaries(settings, group, timeout=5)
    except (KafkaException, RuntimeError):
        return {}
