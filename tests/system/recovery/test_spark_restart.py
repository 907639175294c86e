"""Spark restart: the Spark Connect server goes away mid-run; a new one takes its port.

While it is down the replicas must not commit (the batch has not been summarised, so a commit
would lose it) and must say why on the events topic. Once a server answers on the same port
they resume by themselves, and after draining no stream has lost a message.
"""

from __future__ import annotations

from pathlib import Path

from backend.contracts import events_topic
from backend.engine.server import SparkConnectServer
from backend.fleet.simulator import FleetSimulator
from backend.kafka.settings import KafkaSettings
from backend.kafka.topics import ensure_topics
from backend.netutil import free_port
from tests.replica.harness import EventLog, read_summaries
from tests.system.recovery.conftest import committed_offsets, drained, summaries_now

PARTITIONS = 6
REPLICAS = ("sr-a", "sr-b")


def _spark_errors(log: EventLog, replica: str) -> list[dict]:
    return [e for e in log.of("error", replica) if str(e.get("error", "")).startswith("Spark:")]


def test_replicas_pause_while_spark_is_down_and_resume_on_a_new_server(
        tmp_path: Path, kafka: KafkaSettings, unique: str, replica_fleet_factory,
        spark_factory) -> None:
    group, topic = f"rs-{unique}", f"rs-in-{unique}"
    port = free_port()
    server: SparkConnectServer | None = spark_factory(tmp_path / "spark1", port=port)
    server.start()
    sim: FleetSimulator | None = None
    log: EventLog | None = None
    try:
        ensure_topics(kafka, group=group, topic=topic, partitions=PARTITIONS)
        log = EventLog(kafka, events_topic(group))
        sim = FleetSimulator(kafka, topic, streams=8, rate=120)
        sim.start()
        fleet = replica_fleet_factory(kafka, server.remote, group, topic)
        for name in REPLICAS:
            fleet.start(name)
        fleet.wait(lambda: len(summaries_now(kafka, group)) >= 8, 180,
                   "a summary for every stream while Spark is up")

        # ---- Spark goes away ------------------------------------------------------------
        server.stop()
        server = None
        fleet.wait(lambda: all(_spark_errors(log, r) for r in REPLICAS), 60,
                   "every replica reporting the Spark error")
        frozen = committed_offsets(kafka, group, topic, PARTITIONS)
        # the Spark client retries inside its call, so the replicas go quiet rather than
        # report every attempt; let 3 s worth of new records arrive that nobody may commit
        delivered_then = sim.stats().delivered
        fleet.wait(lambda: sim.stats().delivered >= delivered_then + 360, 60,
                   "360 more records produced while Spark is down")
        assert committed_offsets(kafka, group, topic, PARTITIONS) == frozen, \
            "a replica committed while Spark was down"
        assert sim.stats().delivered > 0

        # ---- a new server on the same port ---------------------------------------------
        server = spark_factory(tmp_path / "spark2", port=port)
        server.start()
        fleet.wait(lambda: all(any(e.get("recovered") for e in log.of("error", r))
                               for r in REPLICAS), 180, "every replica reporting it resumed")
        fleet.wait(lambda: any(v > frozen.get(p, -1) for p, v in
                               committed_offsets(kafka, group, topic, PARTITIONS).items()),
                   60, "committed offsets moving again")

        final = sim.stop()
        assert final.failed == 0, final.last_error
        fleet.wait(lambda: drained(kafka, group, topic, PARTITIONS), 180,
                   "the replicas draining the topic")
        summaries = read_summaries(kafka, group)
        for stream, n in final.next_seq.items():
            s = summaries[stream]
            assert s["gaps"] == 0, (stream, s)
            assert s["last_seq"] == n - 1, (stream, n, s)
            assert s["count"] - s["duplicates"] == s["last_seq"] + 1, (stream, s)
        assert {n: fleet.procs[n].poll() for n in REPLICAS} == dict.fromkeys(REPLICAS)
    finally:
        if sim is not None:
            sim.stop()
        if log is not None:
            log.close()
        if server is not None:
            server.stop()
