"""Class-data archives for the JVMs we start: Spark's engine and Kafka's nodes.

A JVM reads, parses and verifies every class it loads from its jars, one by one; for a
server that is thousands of classes and seconds of a 2-core machine's start. Java's
class-data sharing (a dynamic AppCDS archive, JDK 13+) keeps them ready to map from one
file: a training JVM started with -XX:ArchiveClassesAtExit does what the real ones will and
is stopped, and writes what it loaded; every JVM after it starts with -XX:SharedArchiveFile.

An archive is built once per environment (`make jars`, backend/stack/prepare.py), not at
every exit: writing one takes seconds, beyond what a stop may take (backend/proc.py). A
second JVM then starts on the new file and must map it; only then is it renamed into place,
because a truncated archive crashes the JVM that maps it. A stale one (another Java build,
other jars) the JVM itself detects and ignores, running without it, only slower.

The Spark and Kafka specifics (what runs, what is checked) are in backend/engine/classdata.py
and backend/broker/classdata.py.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

# What writing an archive may take once its JVM is told to stop: Spark's, the largest, fits
# well within it on 2 busy cores (see bench/README.md, "A faster start: Spark's class-data
# archive, Spark serving, the first replica alone")
DUMP_BUDGET_S = 120.0



class JvmService(Protocol):
    """What build needs of a started server (SparkConnectServer, EmbeddedBroker)."""

    @property
    def process(self) -> subprocess.Popen | None: ...

    @property
    def log_file(self) -> Path: ...

    def stop(self, timeout: float = ...) -> int | None: ...


# launch(work_dir, archive, record): a server started in `work_dir`, mapping `archive` or,
# with `record`, writing one there at exit; answering a first request when it returns
Launch = Callable[[Path, "Path | None", "Path | None"], JvmService]


class ClassArchiveError(RuntimeError):
    """The archive could not be built; the JVM starts without one, only slower."""


def java() -> Path | None:
    """The java our JVMs run: JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def archive_dir() -> Path:
    """The environment's own folder for archives (in a virtualenv, inside it). Not the
    user's cache beside Kafka's jars: an archive records the paths of the jars it was written
    for, so one shared file would be rebuilt by every clone in turn."""
    return Path(sys.prefix).resolve() / "share" / "groupscope"


def prefix(name: str) -> str:
    return f"{name}-classes-"


def archive_path(name: str, version: str, jars: Path) -> Path | None:
    """Where `name`'s archive for this Java and these jars lives (None: no java, no jars):
    another JDK build, release or location of the jars gets a new file rather than one the
    JVM would refuse."""
    found = java()
    if found is None:
        return None
    try:
        stat = found.stat()
        jars = jars.resolve()
        installed = jars.stat().st_mtime_ns  # the same release installed anew: new jars
    except OSError:
        return None
    key = hashlib.sha256(
        f"{found}:{stat.st_size}:{stat.st_mtime_ns}:{jars}:{installed}".encode())
    return archive_dir() / f"{prefix(name)}{version}-{key.hexdigest()[:12]}.jsa"


def cached(path: Path | None) -> Path | None:
    """`path` if the archive there has been built."""
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


def build(name: str, target: Path | None, launch: Launch, train: Callable[[JvmService], None],
          what: str, progress: Callable[[str], None] = print) -> Path:
    """Build `name`'s archive at `target` (archive_path) unless it exists, and remove its
    older ones; returns its path. A training server does what `train` asks of it and is
    stopped (its JVM writes the archive); a second one must then map the file. `what` names
    the server in progress lines."""
    if target is None:
        raise ClassArchiveError(f"no java or no {what} jars found")
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    recorded = work / target.name
    try:
        progress(f"recording the classes {what} loads, for a faster start (once per "
                 f"environment)")
        training = launch(work / "record", None, recorded)
        try:
            train(training)
        finally:
            code = training.stop(DUMP_BUDGET_S)
        if code not in (0, 143) or not recorded.is_file():
            raise ClassArchiveError(f"the training {what} exited with {code} without writing "
                                    f"an archive (log {training.log_file})")
        progress(f"checking {what}'s archive ({recorded.stat().st_size / 2**20:.0f} MB)")
        check = launch(work / "check", recorded, None)
        try:
            if check.process is None or not maps(check.process.pid, recorded):
                raise ClassArchiveError(f"the JVM did not take the archive it had just "
                                        f"written (log {check.log_file})")
        finally:
            check.stop()
        os.replace(recorded, target)
        for stale in target.parent.glob(f"{prefix(name)}*.jsa"):
            if stale != target:
                stale.unlink(missing_ok=True)
        progress(f"{what}'s class-data archive: {target}")
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)
