"""Static replicas through the supervisor: a restart moves nothing.

A real supervisor starts two real PySpark replicas as static members (`POST /options` with
`static: true`), then restarts one (`POST /replicas/ada/restart`: a graceful stop, then the
same name starts again). A static member's close sends no LeaveGroup, so the broker keeps
ada's partition for it until the session times out; the new process joins with the same
`group.instance.id` long before that and takes it back. A real Observer, reading the
generation from `__consumer_offsets`, watches the whole time:

- the generation never moves and the group never leaves Stable;
- every partition keeps its owner (by client id) in every poll; only ada's member id changes;
- no rebalance callback reaches bruno; ada's new process is assigned its old partition and
  commits on it again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.contracts import Snapshot, events_topic
from backend.contracts.history import HISTORY_FILE, REJOINED, RESTARTED, Episode
from backend.history.sqlite import SqliteStore
from backend.netutil import wait_until
from backend.observer.observer import Observer
from backend.replica.membership import STATIC_SESSION_TIMEOUT_MS
from tests.replica.harness import EventLog
from tests.supervisor.conftest import Backend, start_backend, stop_backend

PARTITIONS = 2
JOIN_TIMEOUT_S = 120.0
STEADY_S = 4.0  # the baseline: the same generation and owners this long before the restart
STATIC_SESSION_S = STATIC_SESSION_TIMEOUT_MS / 1000


@pytest.fixture
def static_pair(kafka, spark_remote, tmp_path: Path) -> Iterator[Backend]:
    suffix = uuid.uuid4().hex[:8]
    b = start_backend(kafka, tmp_path / "data", f"static-{suffix}", f"telemetry-{suffix}",
                      "--spark-remote", spark_remote, "--replicas", "0",
                      "--partitions", str(PARTITIONS), "--streams", "12", "--rate", "20",
                      "--stop-grace", "20")
    try:
        yield b
    finally:
        stop_backend(b)


MOVES = ("assigned", "revoked", "lost")


def _moves(events: EventLog, replica: str, since: float = 0.0) -> list[tuple[str, tuple[int, ...]]]:
    """A replica's own account of its partitions: assigned / revoked / lost, in order."""
    return [(e["type"], tuple(e["partitions"]))
            for e in events.of(replica=replica, since=since) if e["type"] in MOVES]


def _settled(observer: Observer, events: EventLog) -> Snapshot | None:
    """Stable, ada and bruno one partition each, a generation known, every partition
    committed, and each replica's last event the assignment the group shows: the baseline.

    The broker reports the group Stable as soon as the sync completes, while a replica may
    still be restoring state inside its assign callback; its `assigned` event comes after."""
    snap = observer.latest()
    if snap is None or snap.error or snap.state != "Stable" or snap.generation is None:
        return None
    if sorted((m.client_id, len(m.partitions)) for m in snap.members) != [("ada", 1),
                                                                          ("bruno", 1)]:
        return None
    if any(p.committed is None for p in snap.partitions):
        return None
    for m in snap.members:
        if _moves(events, m.client_id)[-1:] != [("assigned", tuple(m.partitions))]:
            return None
    return snap


def _steady(observer: Observer, events: EventLog) -> Snapshot | None:
    """`_settled`, and every poll of the last STEADY_S in the same generation with the same
    owners: at load 40 the scale to two settled at generation 1 and went to 2 a moment later
    (a slow join), after the test had taken generation 1 as its baseline."""
    snap = _settled(observer, events)
    if snap is None:
        return None
    polls = [s for s in observer.history(since_ms=snap.taken_ms - int(STEADY_S * 1000))
             if not s.error]
    if not polls or snap.taken_ms - polls[0].taken_ms < (STEADY_S - 1) * 1000:
        return None
    owners = {p.partition: p.owner for p in snap.partitions}
    same = all(s.generation == snap.generation and s.state == "Stable"
               and {p.partition: p.owner for p in s.partitions} == owners for s in polls)
    return snap if same else None


def _remembered(b: Backend, since_ms: int) -> list[Episode]:
    """The group's ended episodes begun since `since_ms` in the backend's memory: the store
    answers with those overlapping the span, and the scale to two replicas before it, written
    once it settled, can end inside it on a loaded machine (a CI run at load 40)."""
    store = SqliteStore(b.data_dir / HISTORY_FILE)
    try:
        return [e for c in store.clusters() for e in store.episodes(c.key, b.group, since_ms)
                if e.end_ms is not None and e.start_ms >= since_ms]
    finally:
        store.close()


def _kept(b: Backend) -> str:
    """What the backend's memory holds of the group, in words (for a failure)."""
    store = SqliteStore(b.data_dir / HISTORY_FILE)
    try:
        return "; ".join(
            [f"{e.start_ms} {e.end_ms} {e.seen_as} {e.cause}"
             for c in store.clusters() for e in store.episodes(c.key, b.group)]
            + [f"{s.ts_ms} {s.state} {s.members}"
               for c in store.clusters() for s in store.states(c.key, b.group, 0)]) or "nothing"
    finally:
        store.close()


@pytest.mark.timeout(300)
def test_restarting_a_static_replica_keeps_generation_and_partitions(static_pair: Backend,
                                                                      kafka) -> None:
    b = static_pair
    assert b.client is not None
    assert b.client.set_options(static=True).static
    b.client.scale(2)
    events = EventLog(kafka, events_topic(b.group))
    observer = Observer(kafka, b.group, topic=b.topic, interval=0.5, tail_events=False).start()
    try:
        base = wait_until(lambda: _steady(observer, events), JOIN_TIMEOUT_S, interval=0.5,
                          what="ada and bruno settled, generation known, assignments handled, "
                               f"for {STEADY_S:g} s")
        assert all(m.group_instance_id == m.client_id for m in base.members)
        assert all(r.static for r in b.status().running)
        owners = {p.partition: p.owner for p in base.partitions}
        ada_partitions = next(m.partitions for m in base.members if m.client_id == "ada")
        old_ada = next(m.member_id for m in base.members if m.client_id == "ada")
        committed = {p.partition: p.committed or 0 for p in base.partitions}
        since = time.time()
        since_ms = int(since * 1000)

        b.client.restart("ada")

        def back() -> Snapshot | None:
            """ada under a new member id, and committing on its partition again."""
            snap = observer.latest()
            if snap is None or snap.taken_ms < since_ms:
                return None
            ada = [m for m in snap.members if m.client_id == "ada"]
            if not ada or ada[0].member_id == old_ada:
                return None
            moved = all(p.committed is not None and p.committed > committed[p.partition]
                        for p in snap.partitions if p.partition in ada_partitions)
            return snap if moved else None

        after = wait_until(back, STATIC_SESSION_S, interval=0.5,
                           what="ada back within the session timeout and committing")
        took = time.time() - since
        print(f"\nstatic restart: back and committing after {took:.1f} s "
              f"(session timeout {STATIC_SESSION_S:g} s)")
        info = next(r for r in b.status().replicas if r.name == "ada")
        assert info.restarts == 1 and info.state == "running" and info.static

        polls = [s for s in observer.history(since_ms=since_ms) if not s.error]
        assert len(polls) >= took  # two a second, give or take a slow poll
        assert {s.generation for s in polls} == {base.generation}, "the generation moved"
        assert {s.state for s in polls} == {"Stable"}
        assert all({p.partition: p.owner for p in s.partitions} == owners for s in polls)
        assert next(m.partitions for m in after.members if m.client_id == "ada") == \
            ada_partitions
        member_ids = {(m.client_id, m.member_id) for s in polls for m in s.members}
        print("observer: member ids seen since the restart:", sorted(member_ids))
        recent = [r for r in after.rebalances if r.end_ms is None or r.end_ms >= since_ms]
        print("observer: rebalances it reports since:",
              [(r.reason, r.generation, r.moved) for r in recent])
        # the timeline tells the restart apart: a rejoin, nothing moved, no rebalance
        assert all(r.reason == "rejoin" and not r.moved for r in recent), recent
        assert all(r.cause == REJOINED and "ada" in r.evidence[0] for r in recent), recent
        # and the backend's memory keeps it, joined to the presenter's restart
        try:
            remembered = wait_until(lambda: _remembered(b, since_ms), 30,
                                    what="the restart in the backend's memory")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; it holds {_kept(b)}\n{b.log_tail()}") from None
        assert [e.seen_as for e in remembered] == ["rejoin"], remembered
        (episode,) = remembered
        assert episode.cause == RESTARTED and not episode.rebalance
        assert [c.kind for c in episode.causes] == [RESTARTED, REJOINED]
        assert "ada restarted by the presenter" in episode.causes[0].evidence
        assert episode.impact.moved == () and episode.joined == episode.left == ()

        def ada_moves() -> list[tuple[str, tuple[int, ...]]]:
            return _moves(events, "ada", since)

        # the old process gives its partition up locally as it closes; the new one is
        # handed the same partition back (its events may trail its commits a little)
        wait_until(lambda: ada_moves()[-1:] == [("assigned", ada_partitions)], 30,
                   what=f"ada's assigned event; it has {ada_moves()}")
        assert ada_moves() == [("revoked", ada_partitions), ("assigned", ada_partitions)]
        assert not _moves(events, "bruno", since)
    finally:
        observer.stop()
        events.close()
