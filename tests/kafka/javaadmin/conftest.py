"""Real clients of the other group types for the reading layer's tests: instances of a tiny
Kafka Streams app of ours (streams groups, KIP-1071), and Kafka's own group tools, whose
describe output the reader must equal.

Both run on the pinned Kafka's jars (backend/kafka/jars.py: the broker's lib dir plus the
kafka-streams and kafka-tools jars, without RocksDB). Every JVM here is spawned through
backend.proc, so it dies with the test process however that ends, and is stopped by its
fixture's teardown.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.classdata import java
from backend.kafka.jars import kafka_classpath, kafka_extras
from backend.kafka.javaadmin.javaconfig import java_properties, properties_text
from backend.kafka.settings import KafkaSettings
from backend.netutil import wait_until
from backend.proc import run, spawn, terminate

STREAMS_APP_SOURCE = Path(__file__).with_name("streams_app") / "UpperStreams.java"
STREAMS_APP_CLASS = "groupscope.test.UpperStreams"
SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"
# small, quick-starting JVMs: two app instances and a tool share 2 cores with the broker
JVM_FLAGS = ("-Xmx128m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Djava.awt.headless=true")
APP_START_S = 60.0
TOOL_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0


def _java() -> str:
    found = java()
    if found is None:
        pytest.fail("java not found: the streams app and Kafka's tools need Java 17")
    return str(found)


def _javac() -> str:
    found = java()
    beside = found.parent / "javac" if found is not None else None
    javac = str(beside) if beside is not None and beside.exists() else shutil.which("javac")
    if javac is None:
        pytest.fail("javac not found: the streams app is compiled at test time (install a JDK)")
    return javac


@pytest.fixture(scope="session")
def streams_app_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The classpath of our Kafka Streams app: compiled once per session into pytest's tmp
    dir (a folder named by the source's hash), on Kafka's jars plus kafka-streams."""
    jars = f"{kafka_classpath()}{os.pathsep}{kafka_extras(['kafka-streams'])[0]}"
    digest = hashlib.sha256(STREAMS_APP_SOURCE.read_bytes()).hexdigest()[:12]
    out = tmp_path_factory.mktemp(f"streams-app-{digest}")
    done = run([_javac(), "-nowarn", "-d", str(out), "-cp", jars, str(STREAMS_APP_SOURCE)],
               timeout=180, capture_output=True, text=True)
    assert done.returncode == 0, f"javac failed on {STREAMS_APP_SOURCE}:\n{done.stderr}"
    return f"{out}{os.pathsep}{jars}"


class StreamsApps:
    """Instances of tests/kafka/javaadmin/streams_app/UpperStreams.java, each one stream thread,
    so one member of its streams group; `stop_all` ends them (SIGTERM: they leave the
    group; SIGKILL after a grace)."""

    def __init__(self, kafka: KafkaSettings, classpath: str, work: Path) -> None:
        self.kafka = kafka
        self.classpath = classpath
        self.work = work
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, app_id: str, client_id: str, source: str, sink: str
              ) -> subprocess.Popen[bytes]:
        """Start one instance; returns once it reports RUNNING. Skips the test if the
        broker refuses the streams rebalance protocol, fails it if the app dies otherwise."""
        log = self.work / f"{client_id}.log"
        state = self.work / f"state-{client_id}"
        argv = [_java(), *JVM_FLAGS, "-cp", self.classpath, STREAMS_APP_CLASS,
                self.kafka.bootstrap, app_id, client_id, source, sink, str(state)]
        with open(log, "ab") as out:
            proc = spawn(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append((proc, log))

        def running() -> bool:
            text = log.read_text(errors="replace")
            if "STATE ERROR" in text:
                self._refused_or_failed(client_id, log)
            return "STATE RUNNING" in text

        def died() -> None:
            if proc.poll() is not None:
                self._refused_or_failed(client_id, log)

        wait_until(running, APP_START_S, interval=0.2,
                   what=f"streams app {client_id} of {app_id} to report RUNNING", abort=died)
        return proc

    @staticmethod
    def _refused_or_failed(client_id: str, log: Path) -> None:
        text = log.read_text(errors="replace")
        tail = "\n".join(text.splitlines()[-30:])
        if "UnsupportedVersionException" in text:
            pytest.skip("the broker refuses streams groups (KIP-1071): it needs 'streams' in "
                        "group.coordinator.rebalance.protocols and the streams.version "
                        f"feature at 1; streams app {client_id} said:\n{tail}")
        pytest.fail(f"streams app {client_id} failed; last lines of {log}:\n{tail}")

    def stop_all(self) -> None:
        procs, self.procs = self.procs, []
        for proc, _log in procs:
            if proc.poll() is None:
                proc.terminate()  # all leave their group at once, then each is reaped
        for proc, _log in procs:
            terminate(proc, STOP_GRACE_S)


@pytest.fixture(scope="module")
def streams_apps(kafka: KafkaSettings, streams_app_classpath: str,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[StreamsApps]:
    """A module's streams app instances, all ended at its end (and with pytest, if killed)."""
    apps = StreamsApps(kafka, streams_app_classpath, tmp_path_factory.mktemp("streams-apps"))
    try:
        yield apps
    finally:
        apps.stop_all()


class KafkaTools:
    """Kafka's own command-line tools (their classes, run with `java -cp`) against the
    session's broker, its client settings in a --command-config file."""

    def __init__(self, kafka: KafkaSettings, classpath: str, config: Path) -> None:
        self.kafka = kafka
        self.classpath = classpath
        self.config = config

    def run(self, main_class: str, *args: str) -> str:
        """The tool's standard output; a non-zero exit fails the test with its error."""
        argv = [_java(), *JVM_FLAGS, "-cp", self.classpath, main_class,
                "--bootstrap-server", self.kafka.bootstrap,
                "--command-config", str(self.config), *args]
        done = run(argv, timeout=TOOL_TIMEOUT_S, capture_output=True, text=True)
        assert done.returncode == 0, (f"{main_class.rsplit('.', 1)[-1]} {' '.join(args)} "
                                      f"exited {done.returncode}:\n{done.stderr}{done.stdout}")
        return done.stdout

    def share_group_members(self, group: str) -> str:
        """What `kafka-share-groups.sh --describe --members --group <group>` prints."""
        return self.run(SHARE_GROUP_COMMAND, "--describe", "--members", "--group", group)

    def share_group_offsets(self, group: str) -> str:
        """What `kafka-share-groups.sh --describe --offsets --group <group>` prints: each
        share partition's START-OFFSET and the LAG the broker reports ("-" if it does not)."""
        return self.run(SHARE_GROUP_COMMAND, "--describe", "--offsets", "--group", group)

    def streams_group_members(self, group: str) -> str:
        """What `kafka-streams-groups.sh --describe --members --verbose --group <group>`
        prints (verbose: the target-assignment epoch and each member's target tasks too)."""
        return self.run(STREAMS_GROUP_COMMAND, "--describe", "--members", "--verbose",
                        "--group", group)


@pytest.fixture(scope="session")
def kafka_tools(kafka: KafkaSettings, tmp_path_factory: pytest.TempPathFactory) -> KafkaTools:
    config = tmp_path_factory.mktemp("kafka-tools") / "client.properties"
    config.touch(mode=0o600)  # may hold the cluster's credentials
    config.write_text(properties_text(java_properties(kafka, "groupscope-test-tools")))
    classpath = f"{kafka_classpath()}{os.pathsep}{kafka_extras(['kafka-tools'])[0]}"
    return KafkaTools(kafka, classpath, config)

