"""The Kafka reader JVM's class-data archive, built and used for real: trained against the
session's broker into a folder of the test's own, then mapped by every JVM a gateway starts,
and never a reason for one not to answer."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend import classdata as base
from backend.kafka.javaadmin import classdata, gateway
from backend.kafka.javaadmin.gateway import AdminGateway
from backend.kafka.settings import KafkaSettings

# classes of each jar on the reader's class path: Kafka's Admin, py4j's server, ours
JAR_CLASSES = ("org.apache.kafka.clients.admin.KafkaAdminClient", "py4j.GatewayServer",
               "groupscope.read.AdminReader")


@pytest.fixture(scope="module")
def built(kafka: KafkaSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The archive as `make jars` builds it, into this module's folder instead of the
    environment's (the gateways of these tests find it there by its key)."""
    folder = tmp_path_factory.mktemp("reader-archives")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "archive_dir", lambda: folder)
        lines: list[str] = []
        archive = classdata.build(kafka, lines.append)
        assert archive.parent == folder and archive == classdata.cached_archive(), lines
        yield archive


def _loaded(log: Path) -> dict[str, str]:
    """class -> where the JVM took it from, as -Xlog:class+load says."""
    out = {}
    for line in log.read_text().splitlines():
        name, sep, source = line.partition(" source: ")
        if sep:
            out[name.rsplit(" ", 1)[-1]] = source
    return out


def test_every_jvm_of_a_gateway_maps_the_archive_built_for_it(
        built: Path, kafka: KafkaSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway started as the reader starts one takes the archive of its Java and class
    path by default: its JVM maps the file and loads the classes of all three jars from it,
    and so does the JVM that replaces one killed."""
    monkeypatch.setattr(base, "archive_dir", lambda: built.parent)
    log = tmp_path / "classes.log"
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", f"-Xlog:class+load=info:file={log}")
    reader = AdminGateway(kafka, client_id="test-archive", log_file=tmp_path / "reader.log")
    try:
        for start in (1, 2):
            assert isinstance(reader.call("listGroups")["groups"], list)
            assert reader.starts == start and reader.archive == built
            assert reader.pid is not None and base.maps(reader.pid, built)
            sources = _loaded(log)
            for name in JAR_CLASSES:
                assert sources.get(name) == "shared objects file (top)", (name, sources.get(name))
            reader.restart()
    finally:
        reader.close()


def test_an_archive_of_another_class_path_only_costs_speed(
        built: Path, kafka: KafkaSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader's jar somewhere else (another build of the reader): its key names another
    file, which does not exist, so the JVM starts without one; and when told to map the old
    archive anyway, the JVM refuses it, says so in the log only (its standard output carries
    the port line) and answers."""
    monkeypatch.setattr(base, "archive_dir", lambda: built.parent)
    jars = gateway.class_path()
    moved = tmp_path / "elsewhere" / jars[0].name
    moved.parent.mkdir()
    shutil.copy2(jars[0], moved)
    monkeypatch.setattr(gateway, "class_path", lambda: [moved, *jars[1:]])
    assert gateway.class_archive_path() not in (None, built)

    log = tmp_path / "reader.log"
    for archive in (gateway.CACHED, built):
        reader = AdminGateway(kafka, client_id="test-archive", log_file=log,
                              class_archive=archive)
        try:
            assert reader.call("cluster")["brokers"]
            assert reader.archive == (None if archive == gateway.CACHED else built)
            assert reader.pid is not None and not base.maps(reader.pid, built)
        finally:
            reader.close()
    assert built.name in log.read_text()  # the JVM's notice that it did not use it


def test_junk_where_the_archive_should_be_only_costs_speed(
        kafka: KafkaSettings, tmp_path: Path) -> None:
    junk = tmp_path / "junk.jsa"
    junk.write_bytes(bytes(range(256)) * 64)
    reader = AdminGateway(kafka, client_id="test-archive", log_file=tmp_path / "reader.log",
                          class_archive=junk)
    try:
        assert reader.call("cluster")["brokers"]
        assert reader.pid is not None and not base.maps(reader.pid, junk)
    finally:
        reader.close()
