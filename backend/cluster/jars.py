"""Kafka's jars, resolved by Maven coordinates with the Ivy jar that ships inside pyspark.

Downloaded once into the user's cache directory and reused offline afterwards: a
`.complete` marker is written only after Ivy retrieved every artifact.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from backend.paths import cache_dir

KAFKA_VERSION = "4.3.0"
SCALA_VERSION = "2.13"
# Kafka 4.x logs through slf4j 1.7; this binding routes it into the log4j2 it already ships.
LOG4J_VERSION = "2.25.4"

_IVY_XML = """<ivy-module version="2.0">
  <info organisation="groupscope" module="embedded-kafka"/>
  <dependencies>
    <dependency org="org.apache.kafka" name="kafka_{scala}" rev="{kafka}" conf="default"/>
    <dependency org="org.apache.logging.log4j" name="log4j-slf4j-impl" rev="{log4j}"
                conf="default"/>
  </dependencies>
</ivy-module>
"""


class JarResolutionError(RuntimeError):
    pass


def ivy_jar() -> Path:
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"))
    if not jars:
        raise JarResolutionError("no ivy-*.jar inside the pyspark package; reinstall pyspark")
    return jars[-1]


def kafka_lib_dir(version: str = KAFKA_VERSION) -> Path:
    return cache_dir() / f"kafka-{version}" / "lib"


def kafka_classpath(version: str = KAFKA_VERSION, quiet: bool = False) -> str:
    """Classpath of the pinned Kafka; downloads it on first use with a progress line."""
    lib = kafka_lib_dir(version)
    marker = lib.parent / ".complete"
    if not marker.exists():
        _retrieve(version, lib, quiet)
        marker.write_text(version)
    jars = sorted(lib.glob("*.jar"))
    if not any(j.name.startswith(f"kafka_{SCALA_VERSION}-") for j in jars):
        marker.unlink(missing_ok=True)
        raise JarResolutionError(f"{lib} has no Kafka server jar; run again to re-download")
    return ":".join(str(j) for j in jars)


def _retrieve(version: str, lib: Path, quiet: bool) -> None:
    work = lib.parent
    work.mkdir(parents=True, exist_ok=True)
    ivy_cache = cache_dir() / "ivy-cache"
    spec = work / "ivy.xml"
    spec.write_text(_IVY_XML.format(scala=SCALA_VERSION, kafka=version, log4j=LOG4J_VERSION))
    cmd = [
        "java", "-jar", str(ivy_jar()),
        "-ivy", str(spec),
        "-confs", "default",
        "-cache", str(ivy_cache),
        "-retrieve", str(lib / "[artifact]-[revision](-[classifier]).[ext]"),
        "-warn",
    ]
    log_path = work / "ivy.log"
    done = threading.Event()
    if not quiet:
        threading.Thread(target=_progress, args=(ivy_cache, version, done), daemon=True).start()
    try:
        with open(log_path, "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    finally:
        done.set()
    if rc != 0:
        tail = "\n".join(log_path.read_text().splitlines()[-15:])
        raise JarResolutionError(
            f"could not resolve org.apache.kafka:kafka_{SCALA_VERSION}:{version} "
            f"(Ivy exit {rc}; full log {log_path}):\n{tail}"
        )
    if not quiet:
        count = len(list(lib.glob("*.jar")))
        lead = "\r" if sys.stderr.isatty() else "\n"
        sys.stderr.write(f"{lead}Kafka {version}: {count} jars cached in {lib}{' ' * 20}\n")


def _progress(ivy_cache: Path, version: str, done: threading.Event) -> None:
    """One updating line on a terminal; a line every 5 s in CI logs."""
    start = time.monotonic()
    tty = sys.stderr.isatty()
    while not done.wait(0.5 if tty else 5.0):
        size = sum(f.stat().st_size for f in ivy_cache.rglob("*.jar")) if ivy_cache.exists() else 0
        phase = "downloading" if size else "resolving dependencies"
        line = (f"Kafka {version} jars (about 45 MB, once): {phase}, "
                f"{size / 1e6:5.1f} MB, {time.monotonic() - start:4.0f}s")
        sys.stderr.write(f"\r{line}" if tty else f"{line}\n")
        sys.stderr.flush()
