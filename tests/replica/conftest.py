"""Fixtures for replica integration tests: a fresh topic layout, events, replica processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.contracts import events_topic
from backend.kafka.topics import ensure_topics
from tests.replica.harness import EventLog, ReplicaFleet


@pytest.fixture
def layout(kafka, unique):
    group, topic = f"g-{unique}", f"telemetry-{unique}"
    ensure_topics(kafka, group=group, topic=topic, partitions=6)
    return group, topic


@pytest.fixture
def events(kafka, layout) -> Iterator[EventLog]:
    log = EventLog(kafka, events_topic(layout[0]))
    try:
        yield log
    finally:
        log.close()


@pytest.fixture
def fleet(kafka, spark_remote, layout, artifacts_dir: Path, unique) -> Iterator[ReplicaFleet]:
    log_dir = artifacts_dir / f"replica-{unique}"
    log_dir.mkdir(parents=True, exist_ok=True)
    f = ReplicaFleet(kafka, spark_remote, layout[0], layout[1], log_dir)
    try:
        yield f
    finally:
        f.close()


@pytest.fixture
def summariser(spark_remote):
    """A Spark Connect session of the replica's own kind, dropped after the test."""
    from backend.replica.spark_summary import SparkSummariser

    s = SparkSummariser(spark_remote)
    try:
        yield s
    finally:
        s.reset()
