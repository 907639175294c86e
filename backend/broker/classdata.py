"""Kafka's class-data archive (backend/classdata.py): a node's JVMs map their classes.

An embedded node starts two JVMs: StorageTool formats its storage (first start only), then
the node itself. Both are ready sooner on the archive (see bench/README.md, "Summaries seen
when written; Kafka's class-data archive", "A node's start alone"). In `groupscope up` the
node starts beside Spark's engine, so the CPU it no longer spends goes to the engine too.

The training node answers what the stack asks of a fresh one (`train`, given by
backend/stack/prepare.py: topics, a consumer group, a transaction) before it is stopped; the
check is a second node that maps the file and answers a metadata request. The format tool
maps the node's archive as well: the classes they share (most of its own) come from it.

Where the archive lives is decided in embedded.py (`class_archive_path`), beside the class
path it is only valid for, and re-exported here: a node maps it by default, and this module,
which starts nodes of its own, is what embedded.py must not import.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from backend import classdata as base
from backend.broker.embedded import (
    ARCHIVE_NAME,
    EmbeddedBroker,
    cached_class_archive,
    class_archive_path,
)
from backend.kafka.settings import KafkaSettings
from backend.netutil import free_port

NAME = ARCHIVE_NAME


def archive_path() -> Path | None:
    """Where the archive for this Java and the pinned Kafka's jars lives (None: no java or
    no jars yet)."""
    return class_archive_path()


def cached_archive() -> Path | None:
    """The archive to start a node on, if it has been built."""
    return cached_class_archive()


def build(train: Callable[[KafkaSettings], None],
          progress: Callable[[str], None] = print) -> Path:
    """Build this Java's and Kafka's archive unless it exists; returns its path. `train`
    uses the training node through the settings it is given."""

    def launch(work: Path, archive: Path | None, record: Path | None) -> EmbeddedBroker:
        # start() has a metadata request answered
        return EmbeddedBroker(work, port=free_port(), class_archive=archive,
                              record_classes=record).start()

    return base.build(NAME, archive_path(), launch, lambda node: train(node.settings),
                      "Kafka", progress)
