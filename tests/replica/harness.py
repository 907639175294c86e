"""Real-process test harness for replicas: topics, a contract producer, events, summaries.

Replicas run as `python -m backend.cli replica ...` subprocesses so SIGKILL is a real crash;
they are spawned through backend.proc, so they die with the test run however it ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from backend.chaos import verify
from backend.kafka.settings import KafkaSettings
from backend.netutil import wait_until
from backend.pool.processes import replica_argv
from backend.proc import STOP_WITHIN_S, reap, send, spawn

REPO = Path(__file__).resolve().parents[2]


def message(stream: str, seq: int, ts: int | None = None) -> bytes:
    ts = ts if ts is not None else 1_700_000_000_000 + seq * 100
    return orjson.dumps({
        "stream_id": stream, "seq": seq, "ts": ts, "speed_kmh": 40.0 + seq % 50,
        "rpm": 1500.0 + (seq % 7) * 100, "gear": 3, "engine_temp_c": 88.5,
        "lat": 48.1 + seq * 1e-5, "lon": 11.5 + seq * 1e-5,
    })


class ContractProducer:
    """Contract-shaped telemetry for `streams` cars at `rate` msg/s, murmur2-partitioned."""

    def __init__(self, settings: KafkaSettings, topic: str, streams: int = 12,
                 rate: float = 150.0) -> None:
        self.topic = topic
        self.streams = [f"car-{i:02d}" for i in range(1, streams + 1)]
        self.rate = rate
        self.next_seq = dict.fromkeys(self.streams, 0)
        self._producer = Producer(settings.client_config(**{
            "partitioner": "murmur2_random", "linger.ms": 5, "enable.idempotence": True}))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def produce_one_round(self) -> None:
        for s in self.streams:
            self._producer.produce(self.topic, key=s.encode(),
                                   value=message(s, self.next_seq[s]),
                                   on_delivery=self._on_delivery)
            self.next_seq[s] += 1
        self._producer.poll(0)

    def _run(self) -> None:
        interval = len(self.streams) / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.produce_one_round()
            next_at += interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self) -> ContractProducer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, int]:
        self._stop.set()
        if self._thread:
            self._thread.join(10)
        assert self._producer.flush(30) == 0, "producer did not flush"
        assert not self.errors, self.errors[:3]
        return dict(self.next_seq)

    def produce_raw(self, key: bytes | None, value: bytes | None) -> None:
        self._producer.produce(self.topic, key=key, value=value, on_delivery=self._on_delivery)


class EventLog:
    """Tails the events topic in a thread; every event as a dict, in order."""

    def __init__(self, settings: KafkaSettings, topic: str) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._consumer = Consumer(settings.client_config(**{
            "group.id": f"test-events-{time.time_ns()}", "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}))
        self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self._consumer.consume(500, 0.2):
                if m.error() is None:
                    with self._lock:
                        self.events.append(orjson.loads(m.value()))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()

    def of(self, type_: str | None = None, replica: str | None = None,
           since: float = 0.0) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events
                    if (type_ is None or e["type"] == type_)
                    and (replica is None or e["replica"] == replica)
                    and e["ts"] >= since * 1000]

    def latest_heartbeats(self, replicas: list[str], since: float = 0.0) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for e in self.of("heartbeat", since=since):
            if e["replica"] in replicas:
                out[e["replica"]] = e
        return out


def read_summaries(settings: KafkaSettings, group: str, partitions: int = 6,
                   timeout: float = 20.0) -> dict[str, dict]:
    """Latest committed summary per stream, read to the end of the changelog."""
    return verify.read_summaries(settings, group, timeout=timeout)


@dataclass
class ReplicaFleet:
    """Replica subprocesses; `close()` kills whatever is still running."""

    settings: KafkaSettings
    spark_remote: str
    group: str
    topic: str
    log_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    stopped: set[str] = field(default_factory=set)

    def start(self, name: str, *extra: str) -> subprocess.Popen:
        cmd = replica_argv(name, self.group, self.topic, self.settings.bootstrap,
                           spark_remote=self.spark_remote, extra=("--batch-ms", "500", *extra))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.log_dir / f"{name}.log", "wb") as log:
            proc = spawn(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.procs[name] = proc
        return proc

    def check_alive(self) -> None:
        """Fail fast, with the log tail, when a replica died that the test did not stop."""
        for name, proc in self.procs.items():
            if proc.poll() is not None and name not in self.stopped:
                tail = "\n".join(self.output(name).splitlines()[-15:])
                raise AssertionError(f"replica {name} exited with {proc.returncode}:\n{tail}")

    def wait(self, check: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
        """wait_until, but a replica dying unexpectedly fails at once with its log."""
        return wait_until(check, timeout, interval, what=what, abort=self.check_alive)

    def kill(self, name: str) -> None:
        self.stopped.add(name)
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(10)

    def terminate(self, name: str, timeout: float = 60.0) -> int:
        self.stopped.add(name)
        self.procs[name].send_signal(signal.SIGTERM)
        return self.procs[name].wait(timeout)

    def output(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def close(self) -> None:
        """SIGTERM to all at once, then SIGKILL to any still running after STOP_WITHIN_S."""
        for proc in self.procs.values():
            send(proc, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WITHIN_S
        for proc in self.procs.values():
            reap(proc, deadline - time.monotonic())


class CuttableProxy:
    """A TCP forwarder to a real server that the test can cut and restore (same port).

    Cut = listener closed and every connection dropped, so clients see "connection refused":
    the server is unreachable without being stopped (it is shared by the whole test run).
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        import socket

        self._socket_mod = socket
        self.target = (target_host, target_port)
        self.port = 0
        self._listener: Any = None
        self._conns: list[Any] = []
        self._lock = threading.Lock()
        self._open()

    def _open(self) -> None:
        socket = self._socket_mod
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        self.port = s.getsockname()[1]
        s.listen(64)
        self._listener = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _accept(self, listener: Any) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = self._socket_mod.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: Any, dst: Any) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()

    def cut(self) -> None:
        # shutdown first: close() alone leaves a socket listening while accept() blocks on it
        with contextlib.suppress(OSError):
            self._listener.shutdown(self._socket_mod.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.shutdown(self._socket_mod.SHUT_RDWR)
                c.close()
            except OSError:
                pass

    def restore(self) -> None:
        self._open()

    def close(self) -> None:
        self.cut()
