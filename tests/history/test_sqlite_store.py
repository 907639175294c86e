"""The memory's SQLite store on real files: what goes in comes out, upkeep keeps it bounded,
two writers share it, and a broken file is one line, never a crash."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest

from backend.contracts.history import (
    EPISODE_JSON,
    AuditEntry,
    Cause,
    Episode,
    Impact,
    StateChange,
)
from backend.history.sqlite import HOUR_MS, SqliteStore
from backend.history.store import CounterKey, Cycle, GroupLag, StoreError, resolve_cluster
from backend.netutil import wait_until
from backend.proc import spawn

REPO = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000_000


def episode(group: str, start: int, end: int | None = None, final: bool = False,
            cause: str = "expired") -> Episode:
    return Episode("k", group, start, end, "classic", "state",
                   causes=(Cause(cause, "b stopped committing", member="b", dead_ms=6000),)
                   if end is not None else (),
                   impact=Impact(gap_ms=7000, lag_before=10), left=("b",), final=final)


# the Python memory a fold of 3 000 groups' first points may take at its peak: one group's
# at a time stays under this; all at once took 7.2 MiB (2.4 KB a group)
MAX_FOLD_PEAK_BYTES = 1 << 20


@pytest.fixture
def store(tmp_path: Path):
    s = SqliteStore(tmp_path / "history.sqlite")
    yield s
    s.close()


def test_a_cycle_comes_back_episode_by_episode_and_the_final_version_wins(store):
    store.write(Cycle("k", "h1:9092", NOW, episodes=[episode("g", NOW)],
                      states=[StateChange(NOW, "g", "PreparingRebalance", "classic", "range",
                                          2, None)]))
    store.write(Cycle("k", "h1:9092", NOW + 1000,
                      episodes=[episode("g", NOW, NOW + 1000, final=True),
                                episode("h", NOW - 5000, NOW - 4000, cause="joined")]))
    (g,) = store.episodes("k", "g")
    assert g.end_ms == NOW + 1000 and g.final and g.cause == "expired"
    assert g.causes[0].dead_ms == 6000 and g.impact.gap_ms == 7000
    assert [e.group for e in store.episodes("k")] == ["h", "g"]  # oldest first
    assert [e.group for e in store.episodes("k", limit=1)] == ["g"]  # the newest one
    # a span overlapping an episode has it; one after its end, not
    assert [e.group for e in store.episodes("k", since_ms=NOW + 500)] == ["g"]
    assert store.episodes("k", since_ms=NOW + 1001) == []
    assert [s.state for s in store.states("k", "g", NOW - 1)] == ["PreparingRebalance"]
    assert store.groups("k") == ["g", "h"]
    (info,) = store.clusters()
    assert (info.key, info.name, info.seen_ms) == ("k", "h1:9092", NOW + 1000)
    assert resolve_cluster(store.clusters(), "h2:9092,H1:9092") == info
    assert resolve_cluster(store.clusters(), "other:9092") is None
    assert resolve_cluster(store.clusters(), None) == info


def test_lag_points_folded_into_hourly_blocks_read_back_the_same(store):
    points = [GroupLag("g", NOW + i * 10_000, 100 + i, 1.5 * i,
                       {("t", 0): i, ("t", 1): 2 * i} if i % 6 == 0 else None)
              for i in range(800)]  # over two hours
    for i in range(0, 800, 100):
        store.write(Cycle("k", "h:1", points[i].ts_ms, lag=points[i:i + 100]))
    before = store.lag("k", "g", NOW)
    done = store.maintain(NOW + 800 * 10_000, retention_ms=7 * 24 * HOUR_MS,
                          max_bytes=1 << 30)
    assert done["folded"] > 700
    after = store.lag("k", "g", NOW)
    assert after.times == before.times and after.lags == before.lags
    assert after.lag_tenths == before.lag_tenths and after.part_lags == before.part_lags
    assert after.keys == [("t", 0), ("t", 1)]
    span = store.lag("k", "g", NOW + 100_000, NOW + 200_000)
    assert span.times == [NOW + i * 10_000 for i in range(10, 21)]


def test_a_fold_holds_one_group_at_a_time_however_many_groups_it_folds(store):
    """A watch's first upkeep folds every group's first points, each with its partitions:
    read all at once they cost Python memory in proportion to the cluster."""
    def first_points(groups: int) -> list[GroupLag]:
        return [GroupLag(f"g{g:05d}", NOW, 900, 60.0, {(f"t{g % 30}", p): 90 for p in range(10)})
                for g in range(groups)]

    store.write(Cycle("k", "h:1", NOW, lag=first_points(3000)))
    tracemalloc.start()
    try:
        done = store.maintain(NOW + 300_000, retention_ms=7 * 24 * HOUR_MS, max_bytes=1 << 30)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert done["folded"] == 3000
    assert peak < MAX_FOLD_PEAK_BYTES, f"{peak / 2**20:.1f} MiB at the fold's peak"
    assert store.lag("k", "g02999", NOW).part_lags  # and every group's points kept


def test_upkeep_drops_what_is_past_the_retention_and_keeps_under_the_byte_bound(store):
    old, new = NOW - 8 * 24 * HOUR_MS, NOW - HOUR_MS
    store.write(Cycle("k", "h:1", old, episodes=[episode("g", old, old + 1)]))
    store.write(Cycle("k", "h:1", new, episodes=[episode("g", new, new + 1)]))
    store.maintain(NOW, retention_ms=7 * 24 * HOUR_MS, max_bytes=1 << 30)
    assert [e.start_ms for e in store.episodes("k")] == [new]
    # a day of lag for 50 groups every 15 s, over a bound of 384 KiB (each table and index
    # takes a page of 16 KiB at least): the oldest hours go first
    for hour in range(24):
        t = NOW - (24 - hour) * HOUR_MS
        store.write(Cycle("k", "h:1", t, lag=[
            GroupLag(f"g{g}", t + i * 15_000, (g * 7919 + i * 104729) % 100_000)
            for g in range(50) for i in range(240)]))
    store.maintain(NOW, retention_ms=7 * 24 * HOUR_MS, max_bytes=1 << 30)
    full = store.lag("k", "g1", NOW - 25 * HOUR_MS)
    assert store.size_bytes() > 512 << 10
    store.maintain(NOW, retention_ms=7 * 24 * HOUR_MS, max_bytes=384 << 10)
    kept = store.lag("k", "g1", NOW - 25 * HOUR_MS)
    assert 0 < len(kept) < len(full) and kept.times[-1] == full.times[-1]
    assert store.size_bytes() <= 512 << 10


def test_one_writer_per_cluster_holds_the_lease_until_it_lapses(tmp_path):
    a, b = SqliteStore(tmp_path / "h.sqlite"), SqliteStore(tmp_path / "h.sqlite")
    try:
        assert a.claim("k", "watch", NOW, 60_000)
        assert not b.claim("k", "exporter", NOW + 1000, 60_000)
        assert b.claim("other", "exporter", NOW, 60_000)  # another cluster: its own lease
        assert a.claim("k", "watch", NOW + 30_000, 60_000)  # renewed
        assert b.claim("k", "exporter", NOW + 90_001, 60_000)  # lapsed: taken over
        a.release("k", "watch")  # not the holder any more: nothing happens
        assert not a.claim("k", "watch", NOW + 90_002, 60_000)
    finally:
        a.close()
        b.close()


def test_counters_only_go_up(store):
    key = CounterKey("g", "rebalances", "expired")
    store.write(Cycle("k", "h:1", NOW, counters={key: 5.0}))
    store.write(Cycle("k", "h:1", NOW, counters={key: 3.0}))
    assert store.counters("k") == {key: 5.0}
    seed = store.seed("k", 0)
    assert seed.counters == {key: 5.0}


def test_the_seed_holds_the_last_days_starts_and_each_groups_last_cause(store):
    store.write(Cycle("k", "h:1", NOW, episodes=[
        episode("g", NOW - 3 * 24 * HOUR_MS, NOW - 3 * 24 * HOUR_MS + 1, cause="left"),
        episode("g", NOW - 60_000, NOW - 59_000, cause="joined"),
        episode("g", NOW - 1000)]))  # still open: no cause yet
    seed = store.seed("k", NOW - 24 * HOUR_MS)
    assert seed.starts == {"g": (NOW - 60_000, NOW - 1000)}
    assert seed.last_cause == {"g": (NOW - 60_000, "joined")}


WRITER = textwrap.dedent("""
    import sys
    from backend.contracts.history import Episode
    from backend.history.sqlite import SqliteStore
    from backend.history.store import Cycle, GroupLag
    store = SqliteStore(sys.argv[1])
    name, n = sys.argv[2], 0
    while True:
        store.write(Cycle("k", "h:1", n, episodes=[Episode("k", name, n, n, "classic", "state")],
                          lag=[GroupLag(f"{name}-{g}", n, g) for g in range(200)]))
        print(n, flush=True)
        n += 1
""")


def _writer(path: Path, name: str) -> subprocess.Popen:
    return spawn([sys.executable, "-c", WRITER, str(path), name], cwd=REPO,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_write_at_once_and_a_killed_writer_loses_at_most_its_last_cycle(tmp_path):
    path = tmp_path / "history.sqlite"
    SqliteStore(path).close()
    procs = [_writer(path, "one"), _writer(path, "two")]
    try:
        seen = {}
        for p, name in zip(procs, ("one", "two"), strict=True):
            lines = []
            wait_until(lambda p=p, lines=lines: lines.append(p.stdout.readline()) or
                       len(lines) >= 30, timeout=60, what="30 cycles written")
            seen[name] = int(lines[-1])
        for p in procs:
            p.send_signal(signal.SIGKILL)  # mid-write, most likely: they write in a loop
            p.wait(10)
            last = p.stdout.read().split()
            seen_name = "one" if p is procs[0] else "two"
            if last:
                seen[seen_name] = int(last[-1])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    store = SqliteStore(path)
    try:
        for name, printed in seen.items():
            starts = [e.start_ms for e in store.episodes("k", name)]
            # every cycle it said it wrote is there, in order, with at most one more
            assert starts == list(range(len(starts))) and printed <= starts[-1] <= printed + 1
    finally:
        store.close()


def test_a_damaged_file_is_one_line_naming_it(tmp_path):
    path = tmp_path / "history.sqlite"
    path.write_bytes(b"this is not a database, it is a text file " * 100)
    with pytest.raises(StoreError) as err:
        SqliteStore(path)
    line = str(err.value)
    assert "\n" not in line and str(path) in line and "damaged" in line


def test_a_place_it_cannot_write_is_one_line(tmp_path):
    if os.geteuid() != 0:  # root writes into any directory; a file in the way stops it too
        (tmp_path / "ro").mkdir(mode=0o500)
        with pytest.raises(StoreError) as err:
            SqliteStore(tmp_path / "ro" / "history.sqlite")
        assert "cannot be written" in str(err.value)
    (tmp_path / "data").write_text("a file where the data directory should be")
    with pytest.raises(StoreError) as err:
        SqliteStore(tmp_path / "data" / "history.sqlite")
    line = str(err.value)
    assert "\n" not in line and "a file stands where its directory should be" in line
    assert "--history" in line


def test_a_file_locked_by_another_writer_is_waited_for_then_one_line(tmp_path, monkeypatch):
    import backend.history.sqlite as backend

    path = tmp_path / "history.sqlite"
    SqliteStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a long write
    monkeypatch.setattr(backend, "BUSY_TIMEOUT_MS", 300)
    store = SqliteStore(path)
    try:
        began = time.monotonic()
        with pytest.raises(StoreError) as err:
            store.write(Cycle("k", "h:1", NOW, episodes=[episode("g", NOW)]))
        assert "locked" in str(err.value) and time.monotonic() - began < 5
        holder.execute("ROLLBACK")
        store.write(Cycle("k", "h:1", NOW, episodes=[episode("g", NOW)]))
        assert len(store.episodes("k")) == 1
    finally:
        store.close()
        holder.close()


def test_an_episode_the_first_schema_kept_as_plain_json_still_reads(store):
    e = episode("g", NOW, NOW + 1)
    store.write(Cycle("k", "h:1", NOW, episodes=[e]))
    with store._lock:  # as schema 1 wrote it
        store._db.execute("UPDATE episodes SET body=?", (EPISODE_JSON.dump_json(e),))
    assert store.episodes("k") == [e]


def test_the_audit_keeps_every_write_in_order_until_the_retention(store, tmp_path):
    def write(ts: int, group: str) -> AuditEntry:
        return AuditEntry(ts, "olu@example.com", "offsets page", "h:1 (external, PLAINTEXT)",
                          group, "reset", ("t-0: 40 → 0", "t-1: - → 0"), ("t-2: not leader",))

    entries = [write(NOW + 2, "a"), write(NOW + 1, "b"), write(NOW - 10 * 86_400_000, "a")]
    for e in entries:
        store.add_audit(e)
    assert store.audit(NOW) == [entries[1], entries[0]]  # oldest first
    assert store.audit(0, "a") == [entries[2], entries[0]]
    store.maintain(NOW, retention_ms=7 * 86_400_000, max_bytes=1 << 30)
    assert store.audit(0, "a") == [entries[0]]

    # a file an older groupscope made (schema 2, no audit) gets the table when opened
    old = tmp_path / "old.sqlite"
    SqliteStore(old).close()
    db = sqlite3.connect(old)
    db.execute("DROP TABLE audit")
    db.execute("UPDATE meta SET value='2' WHERE key='schema'")
    db.commit()
    db.close()
    reopened = SqliteStore(old)
    try:
        reopened.add_audit(entries[0])
        assert reopened.audit(0) == [entries[0]]
    finally:
        reopened.close()
