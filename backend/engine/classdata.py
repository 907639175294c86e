"""Spark's class-data archive (backend/classdata.py): the engine's JVM maps its classes.

A Spark Connect server loads many thousands of classes by its first answered query; read,
parsed and verified one by one from their jars they are a large part of a fresh engine's
start on a small machine. Mapped from the archive, a fresh engine listens sooner and answers
a replica's warm-up sooner, for less CPU (bench/engine_start.py; see bench/README.md, "A
faster start: Spark's class-data archive, Spark serving, the first replica alone").

The training engine answers the queries it will serve (`train`, given by
backend/stack/prepare.py: the replicas' warm-ups) before it is stopped; the check is a
second engine that maps the file and answers a query.

Where the archive lives is decided in server.py (`class_archive_path`), beside the jars it
is only valid for, and re-exported here: an engine maps it by default, and this module, which
starts engines of its own, is what server.py must not import.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from backend import classdata as base
from backend.engine.server import (
    ARCHIVE_NAME,
    SparkConnectServer,
    cached_class_archive,
    class_archive_path,
)
from backend.netutil import free_port

NAME = ARCHIVE_NAME
PREFIX = base.prefix(NAME)


def archive_path() -> Path | None:
    """Where the archive for this Java and this environment's pyspark lives (None: no java
    or no pyspark)."""
    return class_archive_path()


def cached_archive() -> Path | None:
    """The archive to start an engine on, if it has been built."""
    return cached_class_archive()


def build(train: Callable[[str], None], progress: Callable[[str], None] = print) -> Path:
    """Build this Java's and pyspark's archive unless it exists; returns its path. `train`
    runs the queries the engine will serve against the Connect URL it is given."""
    def launch(work: Path, archive: Path | None, record: Path | None) -> SparkConnectServer:
        # start() has a real query answered; spark-submit execs into the JVM it maps into
        return SparkConnectServer(work, port=free_port(), class_archive=archive,
                                  record_classes=record).start()

    return base.build(NAME, archive_path(), launch, lambda server: train(server.remote),
                      "Spark", progress)
