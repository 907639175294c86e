"""Kafka's jars from a directory the operator names (GROUPSCOPE_KAFKA_JARS), for a host that
cannot reach Maven Central: taken as they are, or one line saying what is missing (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.kafka.jars import (
    ENV_KAFKA_JARS,
    KAFKA_VERSION,
    JarResolutionError,
    client_jars,
    kafka_lib_dir,
)


def _libs(folder: Path, *names: str) -> Path:
    folder.mkdir()
    for name in names:
        (folder / name).write_bytes(b"PK")
    return folder


def test_a_named_directory_is_read_and_nothing_is_downloaded(tmp_path, monkeypatch) -> None:
    libs = _libs(tmp_path / "libs", f"kafka-clients-{KAFKA_VERSION}.jar", "slf4j-api-1.7.36.jar",
                 "zstd-jni-1.5.6.jar")
    monkeypatch.setenv(ENV_KAFKA_JARS, str(libs))
    assert kafka_lib_dir() == libs
    assert [j.name for j in client_jars()] == [f"kafka-clients-{KAFKA_VERSION}.jar",
                                               "slf4j-api-1.7.36.jar"]
    assert kafka_lib_dir("3.9.1") != libs  # another release is never looked for there


@pytest.mark.parametrize(("names", "says"), [
    ((), "holds no kafka-clients and slf4j-api jars"),
    (("slf4j-api-1.7.36.jar",), "holds no kafka-clients"),
    (("kafka-clients-3.9.1.jar", "slf4j-api-1.7.36.jar"), "holds kafka-clients 3.9.1"),
])
def test_a_directory_without_the_right_client_is_one_line(tmp_path, monkeypatch, names,
                                                          says) -> None:
    monkeypatch.setenv(ENV_KAFKA_JARS, str(_libs(tmp_path / "libs", *names)))
    with pytest.raises(JarResolutionError, match=says) as caught:
        client_jars()
    assert "\n" not in str(caught.value)
