"""Shared fixtures: one real embedded broker and one real Spark Connect server per test run.

Both listen on free ports and are stopped at session end, even when tests fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.cluster.embedded import EmbeddedBroker
from backend.cluster.settings import KafkaSettings
from backend.engine.server import SparkConnectServer
from backend.netutil import free_port

ARTIFACTS = Path(os.environ.get("GROUPSCOPE_TEST_ARTIFACTS", "test-artifacts")).resolve()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    node = EmbeddedBroker(tmp_path_factory.mktemp("broker"), port=free_port())
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def kafka(broker: EmbeddedBroker) -> KafkaSettings:
    return broker.settings


@pytest.fixture(scope="session")
def spark_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    server = SparkConnectServer(tmp_path_factory.mktemp("spark"), port=free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_remote(spark_engine: SparkConnectServer) -> str:
    return spark_engine.remote


@pytest.fixture
def unique() -> str:
    """A short unique suffix for topic and group names, so tests never share state."""
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
