"""Kafka's jars, resolved by Maven coordinates with the Ivy jar that ships inside pyspark.

Downloaded once into the user's cache directory and reused offline afterwards: a
`.complete` marker is written only after Ivy retrieved every artifact. Kafka's artifacts
that the broker does not need (Kafka Streams, Kafka's tools) are retrieved the same way, on
demand, beside it (`kafka_extras`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from backend.paths import cache_dir

KAFKA_VERSION = "4.3.0"
# The Kafka 3.x release the suite keeps groupscope working against: most production clusters
# still run 3.x, and 3.9 is its last (KRaft, `--standalone` formatting, as 4.x).
KAFKA3_VERSION = "3.9.1"
SCALA_VERSION = "2.13"
# Kafka 4.x logs through slf4j 1.7; this binding routes it into the log4j2 it already ships.
LOG4J_VERSION = "2.25.4"
# Kafka 3.x logs through log4j 1 (reload4j), which its Maven artifacts leave out: the jars its
# own distribution ships.
RELOAD4J = (("ch.qos.reload4j", "reload4j", "1.2.25"), ("org.slf4j", "slf4j-reload4j", "1.7.36"))

_IVY_XML = """<ivy-module version="2.0">
  <info organisation="groupscope" module="embedded-kafka"/>
  <dependencies>
    <dependency org="org.apache.kafka" name="kafka_{scala}" rev="{kafka}" conf="default"/>
{logging}
  </dependencies>
</ivy-module>
"""
_LOGGING_DEPENDENCY = '    <dependency org="{org}" name="{name}" rev="{rev}" conf="default"/>'


def major(version: str) -> int:
    return int(version.split(".", 1)[0])


def _broker_ivy_xml(version: str) -> str:
    """Kafka's broker and the logging binding its major version needs."""
    logging = RELOAD4J if major(version) < 4 else \
        (("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),)
    return _IVY_XML.format(scala=SCALA_VERSION, kafka=version, logging="\n".join(
        _LOGGING_DEPENDENCY.format(org=o, name=n, rev=r) for o, n, r in logging))

# Kafka's own artifacts outside the broker's classpath, fetched without their dependencies:
# those are in Kafka's lib dir already, but for rocksdbjni (about 60 MB, loaded only by a
# topology with state stores) and connect-runtime (which the group tools never load).
EXTRA_ARTIFACTS = ("kafka-streams", "kafka-tools")
_EXTRAS_XML = """<ivy-module version="2.0">
  <info organisation="groupscope" module="kafka-extras"/>
  <dependencies>
{dependencies}
  </dependencies>
</ivy-module>
"""
_EXTRA_DEPENDENCY = ('    <dependency org="org.apache.kafka" name="{name}" rev="{kafka}" '
                     'conf="default" transitive="false"/>')


class JarResolutionError(RuntimeError):
    pass


def ivy_jar() -> Path:
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"))
    if not jars:
        raise JarResolutionError("no ivy-*.jar inside the pyspark package; reinstall pyspark")
    return jars[-1]


# a directory holding Kafka's jars (a Kafka install's libs/, or a copy of this cache's), for a
# host that cannot reach Maven Central: read instead of downloading the pinned release
ENV_KAFKA_JARS = "GROUPSCOPE_KAFKA_JARS"


def named_lib_dir() -> Path | None:
    named = os.environ.get(ENV_KAFKA_JARS)
    return Path(named).expanduser() if named else None


def kafka_lib_dir(version: str = KAFKA_VERSION) -> Path:
    named = named_lib_dir()
    if named is not None and version == KAFKA_VERSION:
        return named
    return cache_dir() / f"kafka-{version}" / "lib"


def client_jars() -> list[Path]:
    """kafka-clients and its logging API, for a JVM of ours that talks to Kafka (the reader,
    the offsets writer): from the directory GROUPSCOPE_KAFKA_JARS names, else the pinned
    release, downloaded once with a progress line."""
    lib = kafka_lib_dir()
    named = named_lib_dir()

    def found() -> list[Path]:
        return sorted([*lib.glob("kafka-clients-*.jar"), *lib.glob("slf4j-api-*.jar")])

    jars = found()
    if named is None and len(jars) < 2:
        kafka_classpath()
        jars = found()
    clients = [j for j in jars if j.name.startswith("kafka-clients-")]
    if named is not None and (not clients or len(jars) < 2):
        raise JarResolutionError(f"{ENV_KAFKA_JARS}={named} holds no kafka-clients and "
                                 f"slf4j-api jars: name a Kafka {KAFKA_VERSION} libs/ directory")
    if named is not None:
        have = clients[-1].name.removeprefix("kafka-clients-").removesuffix(".jar")
        if _release(have) < _release(KAFKA_VERSION):
            raise JarResolutionError(f"{ENV_KAFKA_JARS}={named} holds kafka-clients {have}; "
                                     f"groupscope reads with Kafka {KAFKA_VERSION}'s client or "
                                     f"later (it still reads clusters back to Kafka 2.1)")
    return jars


def _release(version: str) -> tuple[int, int]:
    parts = [*version.split("."), "0"][:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return (0, 0)


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


def kafka_extras(names: Sequence[str] = EXTRA_ARTIFACTS, version: str = KAFKA_VERSION,
                 quiet: bool = False) -> list[Path]:
    """The jars of Kafka's artifacts `names` (`org.apache.kafka:<name>:<version>`, e.g.
    kafka-streams, kafka-tools) without their dependencies: run them on `kafka_classpath()`
    plus these. Downloaded once, with a progress line, then reused offline."""
    lib = kafka_lib_dir(version).parent / "extras" / "lib"
    jars = {name: lib / f"{name}-{version}.jar" for name in names}
    missing = sorted(n for n, jar in jars.items()
                     if not (lib.parent / f".{n}.complete").exists() or not jar.exists())
    if missing:
        spec = _EXTRAS_XML.format(dependencies="\n".join(
            _EXTRA_DEPENDENCY.format(name=n, kafka=version) for n in missing))
        _retrieve(version, lib, quiet, spec, what=", ".join(missing))
        for n in missing:
            if not jars[n].exists():
                raise JarResolutionError(f"Ivy retrieved no {jars[n].name} into {lib}")
            (lib.parent / f".{n}.complete").write_text(version)
    return [jars[n] for n in names]


def _retrieve(version: str, lib: Path, quiet: bool, ivy_xml: str | None = None,
              what: str | None = None) -> None:
    """Ivy retrieves `ivy_xml` (by default Kafka's broker with its logging binding) into
    `lib`; `what` names the artifacts, else the broker's, in the progress and error lines."""
    work = lib.parent
    work.mkdir(parents=True, exist_ok=True)
    ivy_cache = cache_dir() / "ivy-cache"
    spec = work / "ivy.xml"
    spec.write_text(ivy_xml or _broker_ivy_xml(version))
    label = f"Kafka {version} {what} jars (once)" if what else \
        f"Kafka {version} jars (about 45 MB, once)"
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
        threading.Thread(target=_progress, args=(ivy_cache, label, done), daemon=True).start()
    try:
        with open(log_path, "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    finally:
        done.set()
    if rc != 0:
        tail = "\n".join(log_path.read_text().splitlines()[-15:])
        wanted = f"Kafka {version}'s {what}" if what else \
            f"org.apache.kafka:kafka_{SCALA_VERSION}:{version}"
        raise JarResolutionError(
            f"could not resolve {wanted} "
            f"(Ivy exit {rc}; full log {log_path}):\n{tail}"
        )
    if not quiet:
        count = len(list(lib.glob("*.jar")))
        lead = "\r" if sys.stderr.isatty() else "\n"
        sys.stderr.write(f"{lead}Kafka {version}{' ' + what if what else ''}: {count} jars "
                         f"cached in {lib}{' ' * 20}\n")


def _progress(ivy_cache: Path, label: str, done: threading.Event) -> None:
    """One updating line on a terminal; a line every 5 s in CI logs."""
    start = time.monotonic()
    tty = sys.stderr.isatty()

    def cached() -> int:
        return sum(f.stat().st_size for f in ivy_cache.rglob("*.jar")) if ivy_cache.exists() else 0

    before = cached()  # what earlier downloads left there
    while not done.wait(0.5 if tty else 5.0):
        size = cached() - before
        phase = "downloading" if size else "resolving dependencies"
        line = (f"{label}: {phase}, "
                f"{size / 1e6:5.1f} MB, {time.monotonic() - start:4.0f}s")
        sys.stderr.write(f"\r{line}" if tty else f"{line}\n")
        sys.stderr.flush()
