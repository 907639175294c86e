"""On the real broker: why each rebalance happened, as the memory records it from outside.

Real members (separate processes, tests/observer/member.py) are killed, closed and joined;
an overview watcher with a recorder watches every group twice a second, as `groupscope
watch` and the exporter do (every 10 s there), and writes the episodes to a real memory
file, read back through `groupscope history`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from backend.contracts.history import (
    EPISODES_JSON,
    EXPIRED,
    JOINED,
    LEFT,
    PARTITIONS_ADDED,
    Episode,
)
from backend.history.causes import MIN_SESSION_MS
from backend.history.recorder import HistoryRecorder
from backend.history.sqlite import SqliteStore
from backend.netutil import wait_until
from backend.observer.overview import OverviewWatcher
from tests.observer.conftest import create_topic, told_or_unseen

REPO = Path(__file__).resolve().parents[2]
# The members' classic session here, longer than member.py's 6 s: "expired" is told from "left"
# by the memory seeing the dead member still listed while its commits stopped, and at load 20
# and more its polls have starved through a whole 6 s session (it then said "left")
SESSION_S = 15.0


class Memory:
    def __init__(self, kafka, path: Path) -> None:
        self.path = path
        self.recorder = HistoryRecorder(path, "test").start()
        self.watcher = OverviewWatcher(kafka, interval=0.5, history=self.recorder,
                                       lag_seconds=False).start()

    def episodes(self, group: str, ended: bool = True) -> list[Episode]:
        if self.recorder.cluster is None:
            return []
        store = SqliteStore(self.path)
        try:
            return [e for e in store.episodes(self.recorder.cluster, group)
                    if e.end_ms is not None or not ended]
        finally:
            store.close()

    def settled(self, group: str, members: int):
        row = self.watcher.row(group)
        ok = row is not None and row.members == members and row.state == "Stable" \
            and not row.rebalancing and all(p.owner for p in row.partitions)
        return row if ok else None


@pytest.fixture
def memory(kafka, tmp_path) -> Iterator[Memory]:
    m = Memory(kafka, tmp_path / "history.sqlite")
    try:
        yield m
    finally:
        m.watcher.stop()
        m.recorder.close()


def history(memory: Memory, group: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "backend.cli", "history", "--group", group,
                           "--history", str(memory.path), "--since", "1h", *args],
                          capture_output=True, text=True, timeout=60, cwd=REPO)


@pytest.mark.idle  # most of it is the killed member's 15 s session running out
@pytest.mark.timeout(240)
def test_a_killed_member_expires_and_a_closed_one_leaves(kafka, unique, members_factory,
                                                         producer_factory, memory):
    topic, group = f"causes-{unique}", f"causes-{unique}"
    create_topic(kafka, topic, 6)
    producer_factory(topic, rate=60.0)
    members = members_factory(group, topic, "classic", "range",
                              extra={"session.timeout.ms": int(SESSION_S * 1000)})
    for name in ("m-a", "m-b", "m-c"):
        members.start(name)
    wait_until(lambda: memory.settled(group, 3), 90, what="three members owning everything")
    time.sleep(2 * 0.5 + 1)  # a few polls of steady commits: the baseline a pause stands out of

    killed_at = time.time()

    def since_kill():
        # by start, not by count: an episode of the start-up is written when it settles,
        # which at load 60 was after the kill (a CI run took it for the kill's)
        return [e for e in memory.episodes(group) if e.start_ms >= killed_at * 1000]

    members.kill("m-b")
    wait_until(lambda: memory.settled(group, 2) and len(since_kill()) >= 1,
               SESSION_S + 30, what="the group settled without m-b, the episode written")
    members.close("m-c")
    wait_until(lambda: memory.settled(group, 1) and len(since_kill()) >= 2,
               30, what="the group settled without m-c")

    expired, left = since_kill()
    assert expired.left == ("m-b",) and left.left == ("m-c",), (expired, left)
    if told_or_unseen(expired, EXPIRED):
        (why,) = expired.causes
        assert why.member == "m-b" and why.member_id and why.host
        # dead from its last commit seen to the group noticing: about the session timeout.
        # The last commit is seen by the first poll after it, and the broker counts the
        # session from the last heartbeat, so the figure runs short by up to a poll and a
        # heartbeat; the memory's polls came late under load in CI (3.5 s against 6 s)
        assert SESSION_S / 2 <= why.dead_ms / 1000 <= SESSION_S + 3, why
    # not noticed at the kill but at the expiry: an episode seen only by its generation
    # moving starts at the poll before it, which a starved poller (load 20 in a CI run) left
    # 2 s early against a 15 s session, so half the session is the bound, as for dead_ms
    assert expired.start_ms / 1000 - killed_at >= SESSION_S / 2
    assert {m.partition for m in expired.impact.moved if m.source == "m-b"}
    if told_or_unseen(left, LEFT):
        # committed until it went, or stalled briefly first (a starved member): never the
        # expiry's wait, which no session makes shorter than MIN_SESSION_MS
        assert left.causes[0].dead_ms < MIN_SESSION_MS, left
    assert left.start_ms - expired.end_ms < 30_000

    text = history(memory, group)
    assert text.returncode == 0, text.stderr
    assert expired.cause in text.stdout and "m-b" in text.stdout and left.cause in text.stdout
    as_json = history(memory, group, "--json")
    assert [e.cause for e in EPISODES_JSON.validate_json(as_json.stdout)][-2:] == [
        expired.cause, left.cause]
    as_csv = history(memory, group, "--csv").stdout.splitlines()
    assert as_csv[0].startswith("start,end,duration_s,cause") and len(as_csv) >= 3


@pytest.mark.timeout(180)
def test_added_partitions_are_the_cause_of_the_rebalance_they_bring(
        kafka, unique, members_factory, producer_factory, memory):
    topic, group = f"grow-{unique}", f"grow-{unique}"
    create_topic(kafka, topic, 2)
    producer_factory(topic, rate=20.0)
    # the consumer looks at the topic's metadata every second, not every 5 minutes
    members = members_factory(group, topic, "classic", "range",
                              extra={"topic.metadata.refresh.interval.ms": 1000})
    members.start("m-a")
    wait_until(lambda: memory.settled(group, 1), 90, what="one member owning both partitions")
    before = len(memory.episodes(group))
    admin = AdminClient(kafka.client_config())
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    grown = wait_until(
        lambda: [e for e in memory.episodes(group)[before:] if e.cause == PARTITIONS_ADDED],
        60, what="an episode caused by the added partitions")
    (cause,) = grown[0].causes
    assert (cause.topic, cause.before, cause.after) == (topic, "2", "4")
    assert {(m.partition, m.target) for m in grown[0].impact.moved} >= {(2, "m-a"), (3, "m-a")}


@pytest.mark.timeout(180)
def test_a_kip848_group_keeps_its_epochs(kafka, unique, members_factory, producer_factory,
                                         memory):
    topic, group = f"epochs-{unique}", f"epochs-{unique}"
    create_topic(kafka, topic, 4)
    producer_factory(topic, rate=20.0)
    members = members_factory(group, topic, "consumer")
    members.start("m-a")
    wait_until(lambda: memory.settled(group, 1), 90, what="m-a owning every partition")
    before = len(memory.episodes(group))
    members.start("m-b")
    wait_until(lambda: memory.settled(group, 2) and len(memory.episodes(group)) > before, 60,
               what="m-b in, the episode written")
    (joined,) = memory.episodes(group)[before:]
    assert joined.protocol == "consumer" and JOINED in {c.kind for c in joined.causes}
    assert joined.generation_before is not None and joined.generation_after is not None
    assert joined.generation_after > joined.generation_before
    assert joined.target_epoch_after is not None
    assert joined.target_epoch_after >= joined.generation_before
    row = memory.watcher.row(group)
    assert row is not None and row.last_cause == JOINED and row.rebalances_24h >= 1
    out = json.loads(history(memory, group, "--json").stdout)
    assert out[-1]["generation_after"] == joined.generation_after
