"""Fixtures for the observer's integration tests: topics, a steady producer, real members.

Members are separate processes running a real confluent-kafka consumer (member.py), so a
test can SIGKILL one exactly like a crashed replica. Every process is killed at teardown.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from backend.contracts.history import DEPARTED, Episode
from backend.kafka.settings import KafkaSettings
from backend.proc import spawn

MEMBER = Path(__file__).with_name("member.py")
REPO = Path(__file__).resolve().parents[2]


def told_or_unseen(episode: Episode, cause: str) -> bool:
    """Whether the memory told `cause`; if not, it must have said "cannot be told" because
    it did not look for seconds around the departure (its in-process polls starve on a CI
    machine at load 40), never the other cause."""
    if episode.cause == cause:
        return True
    told = "; ".join(f"{c.kind} (dead {c.dead_ms} ms): {c.evidence}" for c in episode.causes)
    said = f"expected {cause} or an unseen departure, the memory said {told} " \
           f"(episode {episode.start_ms}..{episode.end_ms}, seen as {episode.seen_as})"
    assert episode.cause == DEPARTED and len(episode.causes) == 1, said
    unseen = re.search(r"went unseen for ([0-9.]+) s", episode.causes[0].evidence)
    assert unseen and float(unseen.group(1)) >= 1.5, said
    return False


def create_topic(settings: KafkaSettings, name: str, partitions: int) -> None:
    admin = AdminClient(settings.client_config())
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


class SteadyProducer:
    """Keyed records at a steady rate, so offsets move and lag has something to measure."""

    def __init__(self, settings: KafkaSettings, topic: str, keys: int = 24,
                 rate: float = 50.0) -> None:
        self.topic, self.keys, self.rate = topic, keys, rate
        self.producer = Producer(settings.client_config(**{"linger.ms": 20}))
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            key = f"car-{i % self.keys:02d}"
            self.producer.produce(self.topic, key=key, value=json.dumps({"seq": i}).encode())
            self.producer.poll(0)
            i += 1
            self.sent = i
            self._stop.wait(1.0 / self.rate)
        self.producer.flush(10)

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


class Members:
    """Real group members as subprocesses; `kill` is SIGKILL, teardown kills the rest."""

    def __init__(self, settings: KafkaSettings, group: str, topic: str, protocol: str,
                 assignor: str | None = None, extra: dict | None = None) -> None:
        self.settings, self.group, self.topic = settings, group, topic
        self.protocol, self.assignor, self.extra = protocol, assignor, extra or {}
        self.procs: dict[str, subprocess.Popen] = {}
        # each member's output (its assignments, librdkafka's complaints), for `report`
        self._logs = Path(tempfile.mkdtemp(prefix="gs-members-"))

    def start(self, client_id: str) -> subprocess.Popen:
        cmd = [sys.executable, str(MEMBER), self.settings.bootstrap, self.group, self.topic,
               client_id, self.protocol, self.assignor or "-", json.dumps(self.extra)]
        with (self._logs / f"{client_id}.log").open("ab") as log:
            proc = spawn(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
        self.procs[client_id] = proc
        return proc

    def report(self, lines: int = 15) -> str:
        """Each member's state and the last lines it wrote: what a test prints when the
        group did not become what it waited for."""
        out = []
        for client_id, proc in self.procs.items():
            log = self._logs / f"{client_id}.log"
            tail = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else []
            state = "running" if proc.poll() is None else f"exited {proc.returncode}"
            out.append(f"member {client_id} ({state}):\n  " + "\n  ".join(tail))
        return "\n".join(out)

    def kill(self, client_id: str) -> None:
        proc = self.procs.pop(client_id)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def close(self, client_id: str) -> None:
        """SIGINT: the member closes its consumer (a final commit, then LeaveGroup). How
        long a close takes is the broker's business: beside the second lane at load 20 and
        more it has taken longer than 20 s."""
        proc = self.procs.pop(client_id)
        proc.send_signal(signal.SIGINT)
        proc.wait(60)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait(10)
        self.procs.clear()
        shutil.rmtree(self._logs, ignore_errors=True)


@pytest.fixture
def members_factory(kafka: KafkaSettings) -> Iterator:
    made: list[Members] = []

    def make(group: str, topic: str, protocol: str, assignor: str | None = None,
             settings: KafkaSettings | None = None, extra: dict | None = None) -> Members:
        m = Members(settings or kafka, group, topic, protocol, assignor, extra)
        made.append(m)
        return m

    try:
        yield make
    finally:
        for m in made:
            m.stop_all()


@pytest.fixture
def producer_factory(kafka: KafkaSettings) -> Iterator:
    made: list[SteadyProducer] = []

    def make(topic: str, settings: KafkaSettings | None = None, **kw) -> SteadyProducer:
        p = SteadyProducer(settings or kafka, topic, **kw).start()
        made.append(p)
        return p

    try:
        yield make
    finally:
        for p in made:
            p.stop()
