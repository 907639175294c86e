"""The recorder between a watcher and the store: never blocking, one line when the store is
unusable, counters that continue across a restart, one writer per cluster."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from backend.contracts.history import Action, Cause, Episode, Impact
from backend.history import recorder as rec
from backend.history.recorder import HistoryRecorder
from backend.history.sqlite import SqliteStore
from backend.history.store import CounterKey, GroupLag, StoreError
from backend.netutil import wait_until


def ended(group: str, start: int, *kinds: str) -> Episode:
    return Episode("k", group, start, start + 500, "classic", "state",
                   causes=tuple(Cause(k, k, member="b") for k in kinds),
                   impact=Impact(unowned_partition_seconds=1.5))


@pytest.fixture
def recorders():
    made: list[HistoryRecorder] = []

    def make(path, role="test", **kw) -> HistoryRecorder:
        r = HistoryRecorder(path, role, **kw).start()
        r.owner = f"{role}-{len(made)}"  # two in one process: two owners
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def test_episodes_are_counted_once_and_the_counts_continue_after_a_restart(tmp_path, recorders):
    path = tmp_path / "history.sqlite"
    first = recorders(path)
    first.set_cluster("k", "h:1")
    now = int(time.time() * 1000)
    first.submit(now, [ended("g", now - 9000, "killed", "expired")])
    first.submit(now + 1, [ended("g", now - 9000, "killed", "expired")])  # its final version
    first.submit(now + 2, [ended("g", now - 5000, "joined")],
                 lag=[GroupLag("g", now, 42, 1.0)])
    expected = {CounterKey("g", "rebalances", "killed"): 1.0,
                CounterKey("g", "rebalances", "joined"): 1.0,
                CounterKey("g", "membership_changes", "expired"): 1.0,
                CounterKey("g", "membership_changes", "joined"): 1.0,
                CounterKey("g", "unowned_partition_seconds", ""): 3.0}
    assert first.counters() == expected
    wait_until(lambda: len(SqliteStore(path).episodes("k")) == 2, timeout=10,
               what="the episodes written")
    first.close()

    again = recorders(path)
    again.set_cluster("k", "h:1")
    seed = wait_until(again.take_seed, timeout=10, what="the seed read back")
    assert seed.starts == {"g": (now - 9000, now - 5000)}
    assert again.counters() == expected
    again.submit(now + 3, [ended("g", now - 1000, "left")])
    assert again.counters()[CounterKey("g", "rebalances", "killed")] == 1.0
    assert again.counters()[CounterKey("g", "membership_changes", "left")] == 1.0


def test_an_unusable_store_is_one_line_and_never_holds_the_watcher_up(tmp_path, recorders,
                                                                      monkeypatch):
    monkeypatch.setattr(rec, "RETRY_S", 0.2)
    path = tmp_path / "history.sqlite"
    path.write_bytes(b"not a database " * 100)
    r = recorders(path)
    r.set_cluster("k", "h:1")
    line = wait_until(lambda: r.error, timeout=10, what="the store's error")
    assert "damaged" in line and str(path) in line and "\n" not in line
    began = time.monotonic()
    for i in range(rec.MAX_PENDING + 50):  # more than it keeps: the oldest lose their lag
        r.submit(i, [ended("g", i)] if i % 50 == 0 else [], lag=[GroupLag("g", i, i)])
    assert time.monotonic() - began < 1.0
    assert r.dropped_points == 50
    path.unlink()  # moved aside: the next try starts a new store, and what waited is written
    wait_until(lambda: r.error is None and r.holder, timeout=10, what="the store usable again")
    store = SqliteStore(path)
    wait_until(lambda: len(store.episodes("k")) == 4, timeout=10,
               what="every episode that waited, lag dropped or not")
    store.close()


def test_one_recorder_writes_a_cluster_and_the_other_takes_over_when_it_stops(
        tmp_path, recorders, monkeypatch):
    monkeypatch.setattr(rec, "CLAIM_RETRY_S", 0.2)
    path = tmp_path / "history.sqlite"
    watch, exporter = recorders(path, "watch"), recorders(path, "exporter")
    for r in (watch, exporter):
        r.set_cluster("k", "h:1")
        r.submit(1)
    wait_until(lambda: watch.holder != exporter.holder, timeout=10, what="one holder")
    holder, other = (watch, exporter) if watch.holder else (exporter, watch)
    holder.close()  # releases the lease
    other.submit(2)
    wait_until(lambda: other.holder, timeout=30, what="the other to take over")


def test_the_supervisors_actions_reach_another_processes_tracker_through_the_store(
        tmp_path, recorders):
    path = tmp_path / "history.sqlite"
    supervisor, watch = recorders(path, "backend"), recorders(path, "watch")
    for r in (supervisor, watch):
        r.set_cluster("k", "h:1")
    now = int(time.time() * 1000)
    supervisor.record_action(Action(now, "g", "ada", "kill"))
    assert [a.replica for a in supervisor.actions("g", now)] == ["ada"]  # at once, its own
    watch.submit(now)
    got = wait_until(lambda: watch.actions("g", now), timeout=10, what="the action read back")
    assert got == [Action(now, "g", "ada", "kill")] and watch.actions("other", now) == []


def test_a_store_that_fails_mid_run_keeps_its_cycles_until_it_works_again(tmp_path, recorders,
                                                                          monkeypatch):
    monkeypatch.setattr(rec, "RETRY_S", 0.2)
    failing = {"on": False}

    class Flaky(SqliteStore):
        def write(self, cycle):
            if failing["on"]:
                raise StoreError(f"history store {self.path} cannot grow: the disk is full")
            super().write(cycle)

    path = tmp_path / "history.sqlite"
    r = recorders(path, open_store=Flaky)
    r.set_cluster("k", "h:1")
    r.submit(1, [ended("g", 1, "left")])
    wait_until(lambda: r.holder, timeout=10, what="the lease")
    failing["on"] = True
    r.submit(2, [ended("g", 2, "left")])
    wait_until(lambda: r.error and "disk is full" in r.error, timeout=10, what="the failure")
    failing["on"] = False
    wait_until(lambda: r.error is None, timeout=10, what="the store back")
    store = SqliteStore(path)
    wait_until(lambda: [e.start_ms for e in store.episodes("k")] == [1, 2], timeout=10,
               what="both episodes")
    store.close()


def test_without_a_path_it_only_counts(recorders):
    r = recorders(None)
    r.set_cluster("k", "h:1")
    r.submit(1, [ended("g", 1, "left")])
    assert r.counters() == {CounterKey("g", "rebalances", "left"): 1.0,
                            CounterKey("g", "membership_changes", "left"): 1.0,
                            CounterKey("g", "unowned_partition_seconds", ""): 1.5}
    assert r.error is None and not r.holder


def test_paths_are_strings_or_paths(tmp_path):
    assert HistoryRecorder(Path(tmp_path / "h.sqlite"), "x").path == str(tmp_path / "h.sqlite")
