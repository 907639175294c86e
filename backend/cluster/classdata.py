"""Kafka's class-data archive (backend/classdata.py): a node's JVMs map their classes.

An embedded node starts two JVMs: StorageTool formats its storage (first start only), then
the node itself. Both are ready sooner on the archive (see bench/README.md, "Summaries seen
when written; Kafka's class-data archive", "A node's start alone"). In `groupscope up` the
node starts beside Spark's engine, so the CPU it no longer spends goes to the engine too.

The training node answers what the stack asks of a fresh one (`train`, given by
backend/stack/prepare.py: topics, a consumer group, a transaction) before it is stopped; the
check is a second node that maps the file and answers a metadata request. The format tool
maps the node's archive as well: the classes they share (most of its own) come from it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from backend import classdata as base
from backend.cluster.jars import KAFKA_VERSION, kafka_lib_dir

NAME = "kafka"

if TYPE_CHECKING:
    from backend.cluster.settings import KafkaSettings


def archive_path() -> Path | None:
    """Where the archive for this Java and the pinned Kafka's jars lives (None: no java or
    no jars yet)."""
    return base.archive_path(NAME, KAFKA_VERSION, kafka_lib_dir())


def cached_archive() -> Path | None:
    """The archive to start a node on, if it has been built."""
    return base.cached(archive_path())


def build(train: Callable[[KafkaSettings], None],
          progress: Callable[[str], None] = print) -> Path:
    """Build this Java's and Kafka's archive unless it exists; returns its path. `train`
    uses the training node through the settings it is given."""
    from backend.cluster.embedded import EmbeddedBroker
    from backend.netutil import free_port

    def launch(work: Path, archive: Path | None, record: Path | None) -> EmbeddedBroker:
        # start() has a metadata request answered
        return EmbeddedBroker(work, port=free_port(), class_archive=archive,
                              record_classes=record).start()

    return base.build(NAME, archive_path(), launch, lambda node: train(node.settings),
                      "Kafka", progress)
