"""The class-data archives of Spark's engine, Kafka's nodes and the Kafka reader's JVM: keyed
to their Java and jars, mapped by their JVMs, and never a reason for one not to start (the
reader's are used for real in tests/kafka/javaadmin/test_reader_archive.py)."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from backend import classdata as base
from backend.broker import classdata as kafka_classdata
from backend.engine import classdata
from backend.kafka.javaadmin import classdata as reader_classdata
from backend.kafka.javaadmin import gateway
from backend.kafka.javaadmin.gateway import ReaderError
from backend.stack import prepare
from backend.stack.prepare import kafka_class_archive, spark_class_archive
from tests.conftest import engine_pid


def _fake_java(root: Path, body: bytes) -> Path:
    java = root / "bin" / "java"
    java.parent.mkdir(parents=True, exist_ok=True)
    java.write_bytes(body)
    java.chmod(0o755)
    return root


def test_the_archive_is_keyed_to_its_java_and_its_pyspark_jars(tmp_path, monkeypatch):
    """The JVM refuses an archive whose Java or whose jars' paths differ from when it was
    written: each gets a file of its own, in the environment's folder."""
    from backend.broker import embedded
    from backend.engine import server

    monkeypatch.setattr(base, "archive_dir", lambda: tmp_path / "env")
    homes = {name: tmp_path / name / "pyspark" for name in ("venv-a", "venv-b")}
    for home in homes.values():
        (home / "jars").mkdir(parents=True)
    monkeypatch.setattr(server, "spark_home", lambda: homes["venv-a"])
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk-a", b"#!/bin/sh\n")))
    first = classdata.archive_path()
    assert first is not None and first.parent == tmp_path / "env"
    assert first.name.startswith(classdata.PREFIX) and first.suffix == ".jsa"
    assert classdata.cached_archive() is None  # not built yet
    first.parent.mkdir(parents=True)
    first.write_bytes(b"built")
    assert classdata.cached_archive() == first

    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk-b", b"#!/bin/sh\n\n")))
    other_java = classdata.archive_path()
    assert other_java is not None and other_java != first
    assert classdata.cached_archive() is None  # another Java: its own, not yet built

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk-a"))
    monkeypatch.setattr(server, "spark_home", lambda: homes["venv-b"])
    other_jars = classdata.archive_path()
    assert other_jars not in (None, first, other_java)  # the same release, other jars

    # Kafka's nodes: an archive of their own, keyed the same way to their jars' folder
    kafka_jars = {name: tmp_path / name / "kafka" / "lib" for name in ("cache-a", "cache-b")}
    for lib in kafka_jars.values():
        lib.mkdir(parents=True)
    monkeypatch.setattr(embedded, "kafka_lib_dir", lambda: kafka_jars["cache-a"])
    kafka = kafka_classdata.archive_path()
    assert kafka is not None and kafka.name.startswith(base.prefix("kafka"))
    assert kafka.parent == first.parent and kafka_classdata.cached_archive() is None
    monkeypatch.setattr(embedded, "kafka_lib_dir", lambda: kafka_jars["cache-b"])
    assert kafka_classdata.archive_path() not in (None, kafka)


def _touch_later(path: Path) -> None:
    """A new file where `path` was: its time a second on (two writes may share a tick)."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_the_reader_archive_is_keyed_to_its_java_its_jars_and_its_compiled_class(
        tmp_path, monkeypatch):
    """The reader's JVM refuses an archive recorded for another Java or another class path:
    a rebuilt AdminReader jar, and another kafka-clients or py4j jar (or the same elsewhere),
    each get a file of their own, beside the other archives."""
    monkeypatch.setattr(base, "archive_dir", lambda: tmp_path / "env")
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk-a", b"#!/bin/sh\n")))
    jars = {name: tmp_path / "jars" / name for name in
            ("reader-1/AdminReader.jar", "kafka-clients-4.3.0.jar", "py4j0.10.9.9.jar")}
    for jar in jars.values():
        jar.parent.mkdir(parents=True, exist_ok=True)
        jar.write_bytes(b"jar")
    reader_jar, clients, py4j = jars.values()
    first = gateway.class_archive_path([reader_jar, clients, py4j])
    assert first is not None and first.parent == tmp_path / "env" and first.suffix == ".jsa"
    assert first.name.startswith(base.prefix(reader_classdata.NAME))
    assert not first.name.startswith((base.prefix("kafka"), base.prefix("spark")))
    assert gateway.cached_class_archive([reader_jar, clients, py4j]) is None
    first.parent.mkdir(parents=True)
    first.write_bytes(b"built")
    assert gateway.cached_class_archive([reader_jar, clients, py4j]) == first
    keys = {first}

    def another(classpath: list[Path]) -> None:
        key = gateway.class_archive_path(classpath)
        assert key is not None and key not in keys
        keys.add(key)

    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk-b", b"#!/bin/sh\n\n")))
    another([reader_jar, clients, py4j])  # another Java
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk-a"))
    rebuilt = tmp_path / "jars" / "reader-2" / "AdminReader.jar"  # another source
    rebuilt.parent.mkdir()
    rebuilt.write_bytes(b"jar")
    another([rebuilt, clients, py4j])
    _touch_later(reader_jar)  # the same source compiled again
    another([reader_jar, clients, py4j])
    _touch_later(py4j)  # another py4j of the same name
    another([reader_jar, clients, py4j])
    moved = tmp_path / "elsewhere" / clients.name
    moved.parent.mkdir()
    moved.write_bytes(clients.read_bytes())
    another([reader_jar, moved, py4j])
    assert gateway.class_archive_path([reader_jar, tmp_path / "gone.jar", py4j]) is None


def test_a_reader_archive_that_cannot_be_built_is_one_line(tmp_path, monkeypatch):
    """`make jars` goes on without the reader's archive: its JVM starts without one."""
    def refuse(settings, progress):
        raise ReaderError("the Kafka reader did not start (see its log)\nmore")

    monkeypatch.setattr(reader_classdata, "build", refuse)
    lines: list[str] = []
    assert prepare.reader_class_archive(lines.append, settings=object()) is None
    assert len(lines) == 1 and "the Kafka reader did not start" in lines[0]
    assert "start without one" in lines[0]


def test_jvm_options_map_an_archive_or_record_one(tmp_path):
    archive, record = tmp_path / "a.jsa", tmp_path / "b.jsa"
    assert base.jvm_options(None) == []
    assert base.jvm_options(archive) == [f"-XX:SharedArchiveFile={archive}"]
    assert base.jvm_options(archive, record) == [f"-XX:ArchiveClassesAtExit={record}"]


def test_an_engine_maps_the_archive_built_for_its_java(spark_engine, spark_factory, tmp_path):
    """What `make jars` builds (here built if it was not), an engine maps by default: its
    JVM loads Spark's classes from the archive instead of from their jars. The session's
    engine (under `make test` the lanes' one) shows it when it started after the archive was
    built, as in every run from a clean clone; only otherwise is an engine started for it
    (half a minute of a loaded suite)."""
    archive = spark_class_archive()
    assert archive is not None, "the archive could not be built (see the line above)"
    assert classdata.cached_archive() == archive
    server = spark_factory(tmp_path / "spark")
    assert server.class_archive == archive
    pid = engine_pid(spark_engine)
    if psutil.Process(pid).create_time() < archive.stat().st_mtime:
        server.start()  # the session's engine is older than the archive
        assert server.process is not None
        pid = server.process.pid
    assert base.maps(pid, archive)  # spark-submit execs the JVM


def test_a_node_maps_the_archive_built_for_its_java(broker_factory, tmp_path):
    """What `make jars` builds for Kafka (here built if it was not), a new node maps by
    default, and so does its format tool, which ran first on the fresh data folder."""
    archive = kafka_class_archive()
    assert archive is not None, "the archive could not be built (see the line above)"
    assert kafka_classdata.cached_archive() == archive
    node = broker_factory(tmp_path / "node")
    assert node.class_archive == archive
    node.start()
    assert node.process is not None and base.maps(node.process.pid, archive)
    assert node.settings.check_reachable(timeout=5.0) == 1


def test_an_archive_a_node_cannot_use_only_costs_speed(broker_factory, tmp_path):
    """Junk where the archive should be (another build's file, a bad copy): the JVM ignores
    it and the node answers as it would without one. The engine's JVM gets the same flag
    from the same `jvm_options` (its mapping test above shows the flag arrives), so one JVM
    started on junk covers both; an engine started without a usable archive costs half a
    minute of the suite for nothing more."""
    junk = tmp_path / "junk.jsa"
    junk.write_bytes(bytes(range(256)) * 64)
    node = broker_factory(tmp_path / "node", class_archive=junk).start()
    assert node.settings.check_reachable(timeout=5.0) == 1
    assert node.process is not None and not base.maps(node.process.pid, junk)
