"""Spark's class-data archive (backend/classdata.py): the engine's JVM maps its classes.

A Spark Connect server loads ~21 000 classes by its first answered query; read, parsed and
verified one by one from their jars they are ~6 s of a 2-core machine's start. Mapped from
the archive, a fresh engine listens after 4.0 s instead of 6.5 s and has answered a
replica's warm-up after 7.9 s instead of 12.8 s, for 40 % less CPU (bench/engine_start.py).

The training engine answers the queries it will serve (`train`, given by
backend/stack/prepare.py: the replicas' warm-ups) before it is stopped; the check is a
second engine that maps the file and answers a query.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from backend import classdata as base

NAME = "spark"
PREFIX = base.prefix(NAME)


def archive_path() -> Path | None:
    """Where the archive for this Java and this environment's pyspark lives (None: no java
    or no pyspark)."""
    from backend.engine.server import spark_home

    try:
        return base.archive_path(NAME, metadata.version("pyspark"), spark_home() / "jars")
    except (metadata.PackageNotFoundError, RuntimeError):
        return None


def cached_archive() -> Path | None:
    """The archive to start an engine on, if it has been built."""
    return base.cached(archive_path())


def build(train: Callable[[str], None], progress: Callable[[str], None] = print) -> Path:
    """Build this Java's and pyspark's archive unless it exists; returns its path. `train`
    runs the queries the engine will serve against the Connect URL it is given."""
    from backend.engine.server import SparkConnectServer
    from backend.netutil import free_port

    def launch(work: Path, archive: Path | None, record: Path | None) -> SparkConnectServer:
        # start() has a real query answered; spark-submit execs into the JVM it maps into
        return SparkConnectServer(work, port=free_port(), class_archive=archive,
                                  record_classes=record).start()

    return base.build(NAME, archive_path(), launch, lambda server: train(server.remote),
                      "Spark", progress)
