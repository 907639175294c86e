"""Replicas end to end: real processes in one group on the real broker and Spark.

Every wait is on a condition (events, summaries); every process is killed in the fixture.
"""

from __future__ import annotations

import time

import pytest

from tests.replica.harness import ContractProducer, read_summaries

NAMES = ["r1", "r2", "r3"]
PARTITIONS = set(range(6))


def _exclusive_owners(events, names, since=0.0):
    """{replica: partitions} once the latest heartbeats cover every partition exactly once."""
    beats = events.latest_heartbeats(names, since=since)
    if set(beats) != set(names):
        return None
    owned = [p for b in beats.values() for p in b["partitions"]]
    if sorted(owned) != sorted(PARTITIONS):
        return None
    return {r: set(b["partitions"]) for r, b in beats.items()}


def _wait_drained(fleet, kafka, group, produced, timeout=90.0):
    def complete():
        summaries = read_summaries(kafka, group)
        ok = all(s in summaries and summaries[s]["last_seq"] + 1 == n
                 and summaries[s]["count"] - summaries[s]["duplicates"] == n
                 for s, n in produced.items())
        return summaries if ok else None

    try:
        return fleet.wait(complete, timeout, interval=1.0, what="every stream summarised")
    except TimeoutError:
        summaries = read_summaries(kafka, group)
        detail = {s: (n, {k: summaries.get(s, {}).get(k)
                          for k in ("count", "last_seq", "duplicates", "gaps")})
                  for s, n in produced.items()}
        raise AssertionError(f"not drained (produced, summary): {detail}") from None


# One of each way a group hands partitions over: eager (range; roundrobin is the same
# eager path in the replica, its config mapped in test_summary.py), cooperative, and the
# consumer protocol, with both commit guarantees between them.
SCENARIOS = [
    pytest.param("classic", "range", False, id="range-atleastonce"),
    pytest.param("classic", "cooperative-sticky", True, id="coopsticky-exactlyonce"),
    pytest.param("consumer", "uniform", True, id="kip848-uniform-exactlyonce"),
]


def _hand_over(fleet, events, owners, victim, how):
    """Stop `victim` (kill -9 or SIGTERM); wait until the others received its streams."""
    victim_streams = set(events.latest_heartbeats([victim])[victim]["streams"])
    assert victim_streams, f"{victim} owned no streams"
    survivors = [n for n in owners if n != victim]
    left_at = time.time()
    if how == "kill":
        fleet.kill(victim)
    else:
        assert fleet.terminate(victim) == 0
        # the replica flushed `stopped` before exiting; the test's own consumer reads it a
        # moment later, so it is awaited rather than expected in the same instant
        fleet.wait(lambda: events.of("stopped", victim), 10, "graceful stop publishing `stopped`")
        assert "Stream revoked: car-" in fleet.output(victim)

    def received_by_survivors():
        got = {e["stream"] for e in events.of("stream_received", since=left_at)
               if e["replica"] in survivors}
        return victim_streams <= got

    fleet.wait(received_by_survivors, 60, f"survivors receiving {victim}'s streams")
    return fleet.wait(lambda: _exclusive_owners(events, survivors, since=left_at), 30,
                      f"{survivors} owning all partitions")


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("protocol", "assignor", "eos"), SCENARIOS)
def test_group_survives_a_crash_and_a_graceful_stop(kafka, layout, events, fleet, protocol,
                                                    assignor, eos):
    group, topic = layout
    producer = ContractProducer(kafka, topic, streams=12, rate=150.0).start()
    try:
        args = ["--protocol", protocol, "--assignor", assignor]
        if eos:
            args.append("--exactly-once")
        for name in NAMES:
            fleet.start(name, *args)

        # every partition owned by exactly one replica, and all three processing
        fleet.wait(lambda: _exclusive_owners(events, NAMES), 120,
                   "3 replicas owning 6 partitions exclusively")
        fleet.wait(lambda: len(events.latest_heartbeats(NAMES)) == 3
                   and all(b["processed"] > 0 for b in events.latest_heartbeats(NAMES).values()),
                   60, "all replicas processing")
        owners = fleet.wait(lambda: _exclusive_owners(events, NAMES), 30, "stable owners")

        crashed = max(owners, key=lambda r: len(owners[r]))
        owners = _hand_over(fleet, events, owners, crashed, "kill")
        stopped = max(owners, key=lambda r: len(owners[r]))
        owners = _hand_over(fleet, events, owners, stopped, "term")
        assert list(owners.values()) == [PARTITIONS]
    finally:
        produced = producer.stop()

    summaries = _wait_drained(fleet, kafka, group, produced)
    for stream, n in produced.items():
        s = summaries[stream]
        assert s["gaps"] == 0, (stream, s["gaps"])
        assert s["last_seq"] + 1 == n
        if eos:
            assert s["duplicates"] == 0, (stream, s["duplicates"])
            assert s["count"] == n
        else:
            assert s["count"] >= n
            assert s["count"] - s["duplicates"] == n
        assert s["fields"]["speed_kmh"]["count"] == s["count"]
    assert any("New stream received: car-" in fleet.output(n) for n in NAMES)

    last = next(iter(owners))
    assert fleet.terminate(last) == 0
    fleet.wait(lambda: events.of("stopped", last), 30, "stopped event of the last replica")
