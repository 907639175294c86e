"""Spark's class-data archive: the engine's JVM maps the classes it needs from one file.

A Spark Connect server loads ~21 000 classes by its first answered query; read, parsed and
verified one by one from their jars they are ~6 s of a 2-core machine's start. Java's
class-data sharing (a dynamic AppCDS archive, JDK 13+) keeps them ready to map: on this
machine a fresh engine then listens after 4.0 s instead of 6.5 s and has answered a
replica's warm-up after 7.9 s instead of 12.8 s, for 40 % less CPU (bench/engine_start.py).

The archive is built once per environment (its Java build and its pyspark's jars), like
Kafka's jars (`make jars`, see backend/stack/prepare.py): a training engine started with
-XX:ArchiveClassesAtExit runs the queries it will serve and is stopped, and the JVM writes
what it loaded. Not at every engine's exit: writing ~190 MB takes ~13 s, beyond what a stop
may take (backend/proc.py). A second engine then starts on the new archive and must map it
and answer a query; only then is it renamed into place (archive_dir), because a truncated
archive crashes the JVM that maps it. A stale one (another Java build, other jars) the JVM
itself detects and ignores, with a warning in spark.log.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

PREFIX = "spark-classes-"
# What writing the archive may take once its JVM is told to stop (~13 s on 2 busy cores)
DUMP_BUDGET_S = 120.0


class ClassArchiveError(RuntimeError):
    """The archive could not be built; the engine starts without one, only slower."""


def _java() -> Path | None:
    """The java spark-submit runs: JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def archive_dir() -> Path:
    """The environment's own folder for it (in a virtualenv, inside it). Not the user's
    cache beside Kafka's jars: the JVM refuses an archive whose jars are at other paths than
    when it was written, so each environment's pyspark needs its own, and one shared file
    would be rebuilt by every clone in turn."""
    return Path(sys.prefix).resolve() / "share" / "groupscope"


def archive_path() -> Path | None:
    """Where the archive for this Java and this environment's pyspark lives (None: no java
    or no pyspark): another JDK build, pyspark release or pyspark location gets a new file
    rather than one the JVM would refuse."""
    from backend.engine.server import spark_home

    java = _java()
    if java is None:
        return None
    try:
        pyspark = metadata.version("pyspark")
        stat = java.stat()
        jars = (spark_home() / "jars").resolve()
        reinstalled = jars.stat().st_mtime_ns  # the same release installed anew: new jars
    except (metadata.PackageNotFoundError, OSError, RuntimeError):
        return None
    key = hashlib.sha256(
        f"{java}:{stat.st_size}:{stat.st_mtime_ns}:{jars}:{reinstalled}".encode())
    return archive_dir() / f"{PREFIX}{pyspark}-{key.hexdigest()[:12]}.jsa"


def cached_archive() -> Path | None:
    """The archive to start an engine on, if it has been built."""
    path = archive_path()
    return path if path is not None and path.is_file() else None


def maps(pid: int, archive: Path) -> bool:
    """Whether process `pid` has `archive` mapped: the JVM took it (one it refuses, it
    neither maps nor fails on; it runs without, and says so only in its log's wording)."""
    real = os.path.realpath(archive)
    try:
        with open(f"/proc/{pid}/maps") as table:
            return any(line.rstrip().endswith(f" {real}") for line in table)
    except OSError:
        return False


def jvm_options(archive: Path | None, record: Path | None = None) -> list[str]:
    """The JVM flags that map `archive` or, with `record`, write one there at exit."""
    if record is not None:
        return [f"-XX:ArchiveClassesAtExit={record}"]
    return [f"-XX:SharedArchiveFile={archive}"] if archive is not None else []


def build(train: Callable[[str], None], progress: Callable[[str], None] = print) -> Path:
    """Build this Java's and pyspark's archive unless it exists; returns its path. `train`
    runs the queries the engine will serve against the Connect URL it is given, so their
    classes are in the archive (backend/stack/prepare.py: the replicas' warm-ups)."""
    from backend.engine.server import SparkConnectServer
    from backend.netutil import free_port

    target = archive_path()
    if target is None:
        raise ClassArchiveError("no java or no pyspark found")
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    recorded = work / target.name
    try:
        progress("recording the classes Spark loads, for a faster engine start "
                 "(once per environment, about a minute)")
        training = SparkConnectServer(work / "record", port=free_port(), class_archive=None,
                                      record_classes=recorded).start()
        try:
            train(training.remote)
        finally:
            code = training.stop(DUMP_BUDGET_S)
        if code not in (0, 143) or not recorded.is_file():
            raise ClassArchiveError(f"the training engine exited with {code} without writing "
                                    f"an archive (log {training.log_file})")
        progress(f"checking the archive ({recorded.stat().st_size / 2**20:.0f} MB)")
        check = SparkConnectServer(work / "check", port=free_port(), class_archive=recorded)
        with check:  # start() answered a real query on it
            assert check.process is not None  # spark-submit execs into the JVM
            if not maps(check.process.pid, recorded):
                raise ClassArchiveError(f"the JVM did not take the archive it had just "
                                        f"written (log {check.log_file})")
        os.replace(recorded, target)
        for stale in target.parent.glob(f"{PREFIX}*.jsa"):
            if stale != target:
                stale.unlink(missing_ok=True)
        progress(f"Spark's class-data archive: {target}")
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)

