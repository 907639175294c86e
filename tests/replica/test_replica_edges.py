"""Replicas at the edges: idle members, malformed input, Spark going away."""

from __future__ import annotations

import math
import time
from urllib.parse import urlparse

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from backend.contracts import dead_letter_topic
from backend.fleet.simulator import FleetSimulator
from tests.replica.harness import ContractProducer, CuttableProxy, read_summaries
from tests.system.security.bad_input import malformed


def _exact(summary: dict | None, produced: int) -> bool:
    return (summary is not None and summary["count"] == produced
            and summary["last_seq"] + 1 == produced and summary["gaps"] == 0)


def _summaries_match(kafka, group, produced):
    summaries = read_summaries(kafka, group)
    ok = all(_exact(summaries.get(s), n) for s, n in produced.items())
    return summaries if ok else None


def _wait_exact(fleet, kafka, group, produced, timeout: float, what: str) -> None:
    """Wait until every stream's summary is exact; a timeout names the streams that are not,
    with what each summary says, so lost, doubled and merely late can be told apart."""
    try:
        fleet.wait(lambda: _summaries_match(kafka, group, produced), timeout, what)
    except TimeoutError as exc:
        summaries = read_summaries(kafka, group)
        off = {s: (n, {k: summaries[s].get(k) for k in ("count", "last_seq", "gaps",
                                                          "duplicates")}
                   if s in summaries else None)
               for s, n in produced.items() if not _exact(summaries.get(s), n)}
        raise TimeoutError(f"{exc}; streams off (produced, summary): {off}") from None


@pytest.mark.timeout(400)
def test_seven_replicas_on_six_partitions_one_is_idle(kafka, layout, events, fleet):
    names = [f"r{i}" for i in range(1, 8)]
    producer = ContractProducer(kafka, layout[1], streams=12, rate=60.0).start()
    try:
        for name in names:
            fleet.start(name)

        def one_idle():
            beats = events.latest_heartbeats(names)
            if set(beats) != set(names):
                return None
            owned = sorted(p for b in beats.values() for p in b["partitions"])
            idle = [r for r, b in beats.items() if b["idle"]]
            return idle if owned == list(range(6)) and len(idle) == 1 else None

        # seven processes import pyspark and warm their Spark session up before joining:
        # on a busy 2-core machine that alone takes minutes
        idle = fleet.wait(one_idle, 300, "exactly one idle replica and 6 partitions owned")
        beat = events.latest_heartbeats(idle)[idle[0]]
        assert beat["partitions"] == [] and beat["streams"] == []
    finally:
        producer.stop()


@pytest.mark.timeout(150)
@pytest.mark.parametrize("feed", ["typed", "raw"])
def test_malformed_input_goes_to_dead_letters(kafka, layout, events, fleet, feed):
    group, topic = layout
    # the good messages come from the real fleet simulator: its contract is what we parse
    fleet_sim = FleetSimulator(kafka, topic=topic, streams=4, rate=math.inf, limit=200)
    fleet_sim.start()
    try:
        assert fleet_sim.wait_finished(60), "fleet simulator did not finish"
    finally:
        stats = fleet_sim.stop()
    assert stats.failed == 0 and stats.delivered == 200
    produced = stats.produced
    assert stats.next_seq == produced  # fresh topic: seq 0..n-1 per stream
    producer = ContractProducer(kafka, topic, streams=4, rate=100.0)
    # every kind of malformed record (security/bad_input.py), interleaved with nothing else: the
    # fleet's good messages come before, and the summaries must still be exact
    bad = [(key, value) for _kind, key, value, _reason in malformed()]
    want = sorted(reason for *_, reason in malformed())
    for key, value in bad:
        producer.produce_raw(key, value)
    producer.stop()

    fleet.start("r1", "--feed", feed)
    fleet.wait(lambda: _summaries_match(kafka, group, produced), 90, "good messages summarised")

    dlq = Consumer(kafka.client_config(**{"group.id": f"dlq-{time.time_ns()}",
                                          "enable.auto.commit": False}))
    dlq.assign([TopicPartition(dead_letter_topic(group), 0, OFFSET_BEGINNING)])
    got: list[dict] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < len(bad) and time.monotonic() < deadline:
            for m in dlq.consume(100, 0.5):
                if m.error() is None:
                    got.append(dict(m.headers() or []))
    finally:
        dlq.close()
    reasons = sorted(h["reason"].decode() for h in got)
    assert len(reasons) == len(bad), reasons
    assert reasons == want
    assert all(h["source.topic"].decode() == topic for h in got)
    fleet.wait(lambda: any(b["dead_letters"] == len(bad)
                           for b in events.latest_heartbeats(["r1"]).values()),
               20, "heartbeat counting the dead letters")


@pytest.mark.timeout(200)
def test_spark_unreachable_keeps_membership_and_loses_nothing(kafka, layout, events, fleet,
                                                               spark_remote):
    group, topic = layout
    target = urlparse(spark_remote.replace("sc://", "http://"))
    proxy = CuttableProxy(target.hostname, target.port)
    producer = ContractProducer(kafka, topic, streams=12, rate=120.0).start()
    try:
        fleet.spark_remote = f"sc://127.0.0.1:{proxy.port}"
        fleet.start("r1", "--exactly-once")
        fleet.wait(lambda: any(b["processed"] > 0
                               for b in events.latest_heartbeats(["r1"]).values()),
                   90, "r1 processing")
        cut_at = time.time()
        proxy.cut()
        fleet.wait(lambda: any("Spark" in e.get("error", "")
                               for e in events.of("error", "r1", since=cut_at)),
                   60, "an error event about Spark")
        # still a member, still heartbeating, owning its partitions, not committing
        fleet.wait(lambda: any(not b["spark_ok"] and b["partitions"] == list(range(6))
                               for b in events.of("heartbeat", "r1", since=cut_at)),
                   30, "heartbeat with spark_ok=false while owning everything")
        restored_at = time.time()
        proxy.restore()
        fleet.wait(lambda: any(b["spark_ok"] and b["processed"] > 0
                               for b in events.of("heartbeat", "r1", since=restored_at)),
                   60, "processing again after Spark came back")
    finally:
        produced = producer.stop()
    try:
        _wait_exact(fleet, kafka, group, produced, 90, "no loss, no duplicates")
        assert not events.of("revoked", "r1") and not events.of("lost", "r1")
    finally:
        fleet.close()
        proxy.close()


@pytest.mark.timeout(200)
def test_frozen_member_loses_its_partitions_and_counts_stay_exact(kafka, layout, events, fleet):
    """SIGSTOP past the session timeout: the group moves on; on SIGCONT the zombie's
    assignment is *lost* (not revoked) and its uncommitted work is discarded, not committed."""
    import signal

    group, topic = layout
    names = ["r1", "r2"]
    producer = ContractProducer(kafka, topic, streams=12, rate=120.0).start()
    try:
        for name in names:
            fleet.start(name, "--exactly-once")

        def split():
            beats = events.latest_heartbeats(names)
            return (len(beats) == 2 and all(b["partitions"] and b["processed"] > 0
                                            for b in beats.values()))

        fleet.wait(split, 120, "two replicas sharing the partitions and processing")
        frozen_at = time.time()
        fleet.procs["r1"].send_signal(signal.SIGSTOP)
        try:
            fleet.wait(lambda: any(b["partitions"] == list(range(6))
                                   for b in events.of("heartbeat", "r2", since=frozen_at)),
                       60, "r2 owning everything while r1 is frozen")
        finally:
            fleet.procs["r1"].send_signal(signal.SIGCONT)
        fleet.wait(lambda: events.of("lost", "r1", since=frozen_at)
                   or events.of("revoked", "r1", since=frozen_at), 60,
                   "r1 noticing it lost its partitions")
        assert events.of("lost", "r1", since=frozen_at), "expected on_lost, got a revoke"
    finally:
        produced = producer.stop()
    _wait_exact(fleet, kafka, group, produced, 90, "exact counts after the zombie")
