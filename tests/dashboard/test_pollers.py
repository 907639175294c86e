"""The shared poller: errors replace values in place, recover by themselves, threads end;
and the memory's reader, whose every trouble is one line."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from backend.contracts.history import HISTORY_FILE, Cause, Episode
from backend.exporter.shared import register_process_watcher
from backend.history.sqlite import SqliteStore
from backend.history.store import Cycle, GroupLag
from backend.netutil import wait_until
from dashboard import pollers
from dashboard.pollers import NO_HISTORY, NO_MEMORY, Poller, SharedMemory, group_memory


def test_error_is_one_line_and_recovery_keeps_last_good_value():
    state = {"n": 0, "fail": False}
    lock = threading.Lock()

    def probe() -> int:
        with lock:
            state["n"] += 1
            if state["fail"]:
                raise RuntimeError("broker down\nsecond line never shown")
            return state["n"]

    poller = Poller("t", probe, interval_s=0.02)
    try:
        first = poller.latest(wait_s=5)
        assert first is not None and first.ok and first.value >= 1
        with lock:
            state["fail"] = True
        bad = wait_until(lambda: (r := poller.latest()) and not r.ok and r, 5, what="error")
        assert bad.error == "broker down"
        assert bad.value is None and bad.last_ok is not None and bad.last_ok >= first.value
        with lock:
            state["fail"] = False
        good = wait_until(lambda: (r := poller.latest()) and r.ok and r, 5, what="recovery")
        assert good.value > bad.last_ok
    finally:
        poller.stop()
    assert not poller.running


def test_unread_poller_stops_its_thread_and_restarts_on_read():
    calls = []
    poller = Poller("idle", lambda: calls.append(1) or len(calls), interval_s=0.01,
                    idle_stop_s=0.1)
    try:
        assert poller.latest(wait_s=5) is not None
        wait_until(lambda: not poller.running, 5, what="idle poller thread to end")
        count = len(calls)
        assert poller.latest() is not None and poller.running
        wait_until(lambda: len(calls) > count, 5, what="restarted poller to probe again")
    finally:
        poller.stop()


def _write(path, name: str = "h:1") -> None:
    store = SqliteStore(path)
    try:
        store.write(Cycle("k", name, 2000, lag=[GroupLag("g", 1000, 5), GroupLag("g", 2000, 7)],
                          episodes=[Episode("k", "g", 1500, 1900, "classic", "state",
                                            causes=(Cause("joined", "c joined"),))]))
    finally:
        store.close()


def test_the_memory_is_read_never_made_and_a_damaged_file_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / HISTORY_FILE
    memory = SharedMemory(str(path))

    def names(store) -> list[str]:
        return [c.name for c in store.clusters()]

    try:
        assert memory.read(names) == (None, NO_MEMORY.format(path=path))
        assert not path.exists()  # a reader never starts a memory
        _write(path)
        assert memory.read(names) == (["h:1"], None)
        # moved aside, and something else in its place: one line, not an exception
        path.rename(tmp_path / "aside.sqlite")
        path.write_bytes(b"not a database" * 100)
        value, error = memory.read(names)
        assert value is None and "damaged" in error and "\n" not in error
        # a new memory in its place is read again (once the retry delay has passed)
        monkeypatch.setattr(pollers, "MEMORY_RETRY_S", 0.0)
        path.unlink()
        _write(path, "h:2")
        assert memory.read(names) == (["h:2"], None)
    finally:
        memory.close()


def test_the_group_s_memory_is_its_cluster_s_and_the_writer_s_trouble_is_shown(
        tmp_path, monkeypatch, fresh_pollers):
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path))
    _write(tmp_path / HISTORY_FILE, "h:1,h:2")
    found = group_memory("H:2", "g", 0, 10_000, limit=10)
    assert found.cluster == "h:1,h:2" and found.error is None
    assert [e.cause for e in found.episodes] == ["joined"] and found.lag.lags == [5, 7]
    other = group_memory("elsewhere:9092", "g", 0, 10_000, limit=10)
    assert other.cluster is None and other.kept == ("h:1,h:2",) and other.error is None
    # `watch` and `exporter`: the file is their recorder's, and its trouble is the line shown
    recorder = SimpleNamespace(path=str(tmp_path / HISTORY_FILE), error="history store … is "
                               "locked by another process (database is locked); retrying")
    register_process_watcher(SimpleNamespace(history=recorder))  # type: ignore[arg-type]
    try:
        stuck = group_memory("h:1", "g", 0, 10_000, limit=10)
        assert stuck.error == recorder.error and len(stuck.episodes) == 1  # still read
        recorder.path = None  # --no-history
        assert group_memory("h:1", "g", 0, 10_000, limit=10).error == NO_HISTORY
    finally:
        register_process_watcher(None)
