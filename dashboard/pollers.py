"""Background pollers shared by every browser tab.

Streamlit reruns page code once per tab per refresh; talking to Kafka or Spark from there
would multiply the load by the number of viewers and block renders on a slow cluster. So a
single daemon thread per probe does the work and page code only reads its latest result.

Rules kept here: the threads never call `st.*`; results are immutable and swapped under a lock;
a poller nobody has read for `idle_stop_s` lets its thread end (a Watch page closed hours ago
costs nothing) and restarts on the next read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from backend.contracts.history import HISTORY_FILE, Episode
from backend.errors import one_line
from backend.exporter.shared import process_watcher
from backend.history.sqlite import SqliteStore
from backend.history.store import HistoryStore, StoreError, resolve_cluster
from backend.observer.observer import DASHBOARD_INTERVAL_S, Observer
from backend.observer.overview import OverviewWatcher
from backend.observer.queue_tail import QueueTail
from backend.paths import data_dir
from backend.supervisor.client import ControlClient, ControlError
from dashboard.checks import ClusterProbe, ClusterTarget, probe_engine

if TYPE_CHECKING:
    from backend.contracts.control import BrokerNode
    from backend.history.chunks import LagBlock

T = TypeVar("T")


@dataclass(frozen=True)
class Reading(Generic[T]):
    """One probe outcome: a value, or the one-line error that replaced it."""

    value: T | None
    error: str | None
    taken_at: float  # time.time() when the probe finished
    duration_s: float
    last_ok: T | None = None  # the last good value, so a page can show stale data greyed out

    @property
    def ok(self) -> bool:
        return self.error is None

    def age_s(self, now: float | None = None) -> float:
        return max(0.0, (now or time.time()) - self.taken_at)


class Poller(Generic[T]):
    """Run `probe` every `interval_s` on one daemon thread; readers get the latest Reading."""

    def __init__(self, name: str, probe: Callable[[], T], interval_s: float,
                 idle_stop_s: float = 120.0, close: Callable[[], None] | None = None) -> None:
        self.name = name
        self._probe = probe
        self._close = close  # what the probe holds (a reader's JVM), released by `stop`
        self.interval_s = interval_s
        self.idle_stop_s = idle_stop_s
        self._lock = threading.Lock()
        self._reading: Reading[T] | None = None
        self._first = threading.Event()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_read = time.monotonic()

    # -- reader side (Streamlit script threads) --------------------------------------------
    def latest(self, wait_s: float = 0.0) -> Reading[T] | None:
        """The newest Reading; on the very first read, wait up to `wait_s` for one to exist."""
        self._last_read = time.monotonic()
        self.ensure_running()
        if wait_s > 0 and not self._first.is_set():
            self._first.wait(wait_s)
        with self._lock:
            return self._reading

    def poll_now(self) -> None:
        """Ask for a probe as soon as possible (after a control action, say)."""
        self.ensure_running()
        self._wake.set()

    def ensure_running(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"poller:{self.name}",
                                            daemon=True)
            self._thread.start()

    def stop(self, join_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(join_s)
        if self._close is not None:
            self._close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- poller thread -----------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self._once()
            if time.monotonic() - self._last_read > self.idle_stop_s:
                return  # nobody is looking; the next latest() restarts us
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def _once(self) -> None:
        started = time.monotonic()
        try:
            value: T | None = self._probe()
            error = None
        except Exception as exc:  # any failure is shown in place and retried next tick
            value, error = None, one_line(exc)
        with self._lock:
            previous = self._reading
            last_ok = value if error is None else (previous.last_ok if previous else None)
            self._reading = Reading(value, error, time.time(), time.monotonic() - started,
                                    last_ok)
        self._first.set()


def first_value(read: Callable[[], T | None], wait_s: float) -> T | None:
    """`read()`, retried for up to `wait_s` while it has nothing yet: the first page load
    after a watcher starts waits for its first result instead of drawing an empty page."""
    deadline = time.monotonic() + wait_s
    value = read()
    while value is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the watcher's own thread produces it; nothing to wait on but time
        value = read()
    return value


# ---- shared instances (one per process, for every tab) -------------------------------------
# Streamlit's cache_resource holds one object per argument tuple for the whole server process;
# on_release stops the thread when an entry is evicted or the cache is cleared.

def _release(poller: Poller) -> None:
    poller.stop(join_s=0.0)


def cluster_poller(target: object, interval_s: float = 2.0) -> Poller:
    return _cluster_poller(target, interval_s)


def engine_poller(remote: str, interval_s: float = 10.0) -> Poller:
    return _engine_poller(remote, interval_s)


def _cached(func: Callable) -> Callable:
    import streamlit as st

    return st.cache_resource(show_spinner=False, max_entries=16, on_release=_release)(func)


@_cached
def _cluster_poller(target: object, interval_s: float) -> Poller:
    assert isinstance(target, ClusterTarget)
    probe = ClusterProbe(target)
    return Poller(f"cluster:{target.bootstrap or 'env'}", probe, interval_s, close=probe.close)


@_cached
def _engine_poller(remote: str, interval_s: float) -> Poller:
    return Poller(f"engine:{remote}", lambda: probe_engine(remote), interval_s)


# ---- the group observer and the supervisor's status ----------------------------------------

class _IdleStopped:
    """What SharedObserver and SharedOverview share: a reader marks each read (`_touch`),
    and a watchdog thread calls `_halt` once nobody has read for `idle_stop_s`."""

    def __init__(self, idle_stop_s: float) -> None:
        self.idle_stop_s = idle_stop_s
        self.error: str | None = None
        self._lock = threading.Lock()
        self._last_read = time.monotonic()
        self._watchdog: threading.Thread | None = None
        self._closed = threading.Event()

    def _touch(self) -> None:
        self._last_read = time.monotonic()

    def _ensure_watchdog(self, name: str) -> None:
        """Called under `_lock` once the watched thing runs."""
        if self._watchdog is None or not self._watchdog.is_alive():
            self._closed.clear()
            self._watchdog = threading.Thread(target=self._watch, daemon=True, name=name)
            self._watchdog.start()

    def _watch(self) -> None:
        while not self._closed.wait(2.0):
            if time.monotonic() - self._last_read > self.idle_stop_s:
                self._halt()
                return

    def _halt(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._closed.set()
        self._halt()


class SharedObserver(_IdleStopped):
    """One backend.observer.Observer per (cluster, group, topic), shared by every tab.

    The Observer runs its own thread; this wrapper starts it on first read, reports a bad
    cluster configuration as an error instead of raising, and stops it after `idle_stop_s`
    without readers (its history stays, and it resumes on the next read).
    """

    def __init__(self, target: object, group: str, topic: str | None,
                 interval_s: float = DASHBOARD_INTERVAL_S, idle_stop_s: float = 300.0) -> None:
        super().__init__(idle_stop_s)
        self.target = target
        self.group = group
        self.topic = topic
        self.interval_s = interval_s
        self._observer = None

    def _ensure(self):
        self._touch()
        with self._lock:
            if self._observer is None:
                try:  # settings, and the client they make (a key it cannot decrypt)
                    settings = self.target.settings()  # type: ignore[attr-defined]
                    self._observer = Observer(settings, self.group, self.topic,
                                              interval=self.interval_s)
                except Exception as exc:
                    self.error = one_line(exc)
                    return None
                self.error = None
            self._observer.start()  # a no-op while its thread runs
            self._ensure_watchdog(f"observer-watch:{self.group}")
            return self._observer

    def latest(self, wait_s: float = 0.0):
        obs = self._ensure()
        return None if obs is None else first_value(obs.latest, wait_s)

    def shown(self, wait_s: float = 0.0):
        """The snapshot a group's page draws: after a failed poll, the last good one carrying
        the error (SnapshotStore.latest_shown); `latest` is the failed one itself."""
        obs = self._ensure()
        return None if obs is None else first_value(obs.latest_shown, wait_s)

    def history(self, since_ms: int | None = None) -> tuple:
        obs = self._ensure()
        return obs.history(since_ms) if obs is not None else ()

    def summaries(self) -> dict:
        obs = self._ensure()
        return obs.summaries() if obs is not None else {}

    def _halt(self) -> None:
        with self._lock:
            if self._observer is not None:
                self._observer.stop(timeout=5.0)


def observer_for(target: object, group: str, topic: str | None) -> SharedObserver:
    return _observer_for(target, group, topic)


def _release_observer(shared: SharedObserver) -> None:
    threading.Thread(target=shared.stop, daemon=True).start()


def _cached_observer(func: Callable) -> Callable:
    import streamlit as st

    return st.cache_resource(show_spinner=False, max_entries=8,
                             on_release=_release_observer)(func)


@_cached_observer
def _observer_for(target: object, group: str, topic: str | None) -> SharedObserver:
    return SharedObserver(target, group, topic)


def supervisor_poller(data_dir: str, interval_s: float = 1.0) -> Poller:
    """The supervisor's /status, or the reason it cannot be had (not running, no token)."""
    return _supervisor_poller(data_dir, interval_s)


@_cached
def _supervisor_poller(data_dir: str, interval_s: float) -> Poller:
    from pathlib import Path

    def probe():
        return ControlClient.discover(Path(data_dir), timeout=2.0).status()

    return Poller(f"supervisor:{data_dir}", probe, interval_s)


def queue_poller(target: object, share_group: str, interval_s: float = 2.0) -> Poller:
    """A share group's per-stream summaries (backend/observer/queue_tail.py), or the reason
    they cannot be read."""
    return _queue_poller(target, share_group, interval_s)


@_cached
def _queue_poller(target: object, share_group: str, interval_s: float) -> Poller:
    tail: list = []  # made on the poller's thread at its first read, used only there

    def probe():
        if not tail:
            tail.append(QueueTail(target.settings(), share_group))  # type: ignore[attr-defined]
        return tail[0].read()

    return Poller(f"queue:{share_group}", probe, interval_s)


BROKERS_TIMEOUT_S = 5.0  # a loaded laptop (seven JVMs on 2 cores) can take seconds to answer


def supervisor_brokers(data_dir: str) -> tuple[BrokerNode, ...]:
    """The nodes the supervisor running from `data_dir` runs (`GET /brokers`); an empty
    tuple when no supervisor runs there (`web` alone) or it runs none (its 409: the stack
    reads an external cluster). Any other failure raises: the buttons' absence then has a
    reason to show."""
    from pathlib import Path

    try:
        client = ControlClient.discover(Path(data_dir), timeout=BROKERS_TIMEOUT_S)
    except ControlError:
        return ()
    try:
        return tuple(client.brokers().brokers)
    except ControlError as exc:
        if exc.status == 409:
            return ()
        raise


def broker_poller(data_dir: str, interval_s: float = 1.0) -> Poller:
    """`supervisor_brokers`, polled for the broker buttons."""
    return _broker_poller(data_dir, interval_s)


@_cached
def _broker_poller(data_dir: str, interval_s: float) -> Poller:
    return Poller(f"brokers:{data_dir}", lambda: supervisor_brokers(data_dir), interval_s)


# ---- the cluster overview (every group) ----------------------------------------------------

def same_cluster(a: str, b: str) -> bool:
    """Two bootstrap lists name the same cluster (order, case and spaces aside)."""
    def norm(s: str) -> frozenset[str]:
        return frozenset(h.strip().lower() for h in s.split(",") if h.strip())
    return bool(norm(a)) and norm(a) == norm(b)


class SharedOverview(_IdleStopped):
    """One backend.observer.overview.OverviewWatcher per cluster, shared by every tab.

    When the process already runs an always-on watcher for this cluster (`groupscope
    exporter`, `watch --metrics-port`: backend/exporter/shared.py) pages read that one, so a
    cluster never has two watchers' requests; it is never stopped from here. Otherwise this
    wrapper starts its own on first read and stops it after `idle_stop_s` without readers (a
    stopped watcher cannot restart: the next read starts a fresh one, its trends anew).
    """

    def __init__(self, target: object, interval_s: float = 10.0,
                 idle_stop_s: float = 300.0) -> None:
        super().__init__(idle_stop_s)
        self.target = target
        self.interval_s = interval_s
        self._settings = None
        self._own = None  # the watcher this wrapper started, if any

    def watcher(self):
        """The watcher to read, running; None (and `error` set) when the settings are bad."""
        self._touch()
        with self._lock:
            if self._settings is None:
                try:
                    self._settings = self.target.settings()  # type: ignore[attr-defined]
                except Exception as exc:
                    self.error = one_line(exc)
                    return None
                self.error = None
            shared = process_watcher()
            if shared is not None and same_cluster(shared.settings.bootstrap,
                                                   self._settings.bootstrap):
                if self._own is not None:  # registered after ours started: keep one
                    own, self._own = self._own, None
                    threading.Thread(target=own.stop, daemon=True).start()
                return shared
            if self._own is None:
                try:  # the client its settings make may be refused (a key it cannot decrypt)
                    self._own = OverviewWatcher(self._settings, interval=self.interval_s)
                except Exception as exc:
                    self.error = one_line(exc)
                    return None
                self.error = None
                self._own.start()
                self._ensure_watchdog("overview-watch")
            return self._own

    def latest(self, wait_s: float = 0.0):
        """The newest Overview; on the first read, wait up to `wait_s` for the listing."""
        watcher = self.watcher()
        return None if watcher is None else first_value(watcher.latest, wait_s)

    def prioritise(self, groups: list[str]) -> None:
        watcher = self.watcher()
        if watcher is not None:
            watcher.prioritise(groups)

    def wake(self) -> None:
        watcher = self.watcher()
        if watcher is not None:
            watcher.wake()

    def _halt(self) -> None:
        with self._lock:
            own, self._own = self._own, None
        if own is not None:
            own.stop()


def overview_for(target: object) -> SharedOverview:
    """The cluster overview every Groups page tab reads (one watcher per cluster)."""
    return _overview_for(target)


@_cached_observer
def _overview_for(target: object) -> SharedOverview:
    return SharedOverview(target)


# ---- the memory (a group's rebalances, states and lag, kept for days) ----------------------
# The memory is a file (`backend/history`), written by the process's recorder (`watch`,
# `exporter`) or, in the demo, by the backend process; pages only read it, through one
# SqliteStore per file for every tab. Whatever goes wrong is one line, never an exception.

MEMORY_RETRY_S = 10.0  # a file that could not be opened is tried again after this
NO_MEMORY = ("no memory yet at {path}: `groupscope watch`, `exporter` or the demo's backend "
             "keep it")
NO_HISTORY = "this process keeps no memory (--no-history): only the live view below"


def memory_file() -> tuple[str | None, str | None]:
    """The memory's file the pages read, and the line to show while its writer cannot use it.

    In `watch` and `exporter` the process's always-on watcher records it, wherever --history
    put it; else (the demo's `web`, which only reads) it is HISTORY_FILE in the data
    directory, where the backend process keeps it."""
    recorder = getattr(process_watcher(), "history", None)
    if recorder is not None:
        if recorder.path is None:
            return None, NO_HISTORY
        return recorder.path, recorder.error
    return str(data_dir() / HISTORY_FILE), None


class SharedMemory:
    """One file's store, shared by every tab (SqliteStore is thread-safe): opened on the
    first read, again if the file was replaced (moved aside, a new one started), and, after
    a failure, at most every MEMORY_RETRY_S. A missing file is never created from here."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._store: HistoryStore | None = None
        self._inode: int | None = None
        self._error: str | None = None
        self._failed_at = -MEMORY_RETRY_S

    def read(self, what: Callable[[HistoryStore], T]) -> tuple[T | None, str | None]:
        """`what(store)`, or None and the one line saying why it could not be had."""
        store, error = self._open()
        if store is None:
            return None, error
        try:
            return what(store), None
        except StoreError as exc:
            self._fail(str(exc))
            return None, str(exc)
        except Exception as exc:  # a body this code cannot read: still one line
            line = f"history store {self.path} cannot be read: {one_line(exc)}"
            self._fail(line)
            return None, line

    def _open(self) -> tuple[HistoryStore | None, str | None]:
        from pathlib import Path

        with self._lock:
            try:
                inode = Path(self.path).stat().st_ino
            except OSError:
                inode = None
            if inode is None:
                self._close()
                return None, NO_MEMORY.format(path=self.path)
            if self._store is not None and inode == self._inode:
                return self._store, None
            self._close()
            if self._error and time.monotonic() - self._failed_at < MEMORY_RETRY_S:
                return None, self._error
            try:
                self._store = SqliteStore(self.path)
            except StoreError as exc:
                self._error, self._failed_at = str(exc), time.monotonic()
                return None, self._error
            except Exception as exc:
                self._error = f"history store {self.path} cannot be opened: {one_line(exc)}"
                self._failed_at = time.monotonic()
                return None, self._error
            self._inode, self._error = inode, None
            return self._store, None

    def _fail(self, line: str) -> None:
        with self._lock:
            self._close()
            self._error, self._failed_at = line, time.monotonic()

    def _close(self) -> None:
        """Under `_lock`."""
        store, self._store, self._inode = self._store, None, None
        if store is not None:
            store.close()

    def close(self) -> None:
        with self._lock:
            self._close()


@dataclass(frozen=True)
class GroupMemory:
    """What the memory keeps of one group over a span, or why it cannot say.

    `cluster` is None when the file keeps no cluster sharing a server with the page's (then
    `kept` names those it does keep); `error` is the one line to show, and may come with data
    (the writer is stuck, the reader is not)."""

    path: str | None
    cluster: str | None = None
    kept: tuple[str, ...] = ()
    episodes: tuple[Episode, ...] = ()  # oldest first
    lag: LagBlock | None = None
    error: str | None = None


def group_memory(bootstrap: str | None, group: str, since_ms: int, until_ms: int,
                 limit: int) -> GroupMemory:
    """The group's episodes (the newest `limit` of the span) and lag, from the memory of the
    cluster at `bootstrap`. Never raises."""
    path, problem = memory_file()
    if path is None:
        return GroupMemory(None, error=problem)

    def load(store: HistoryStore) -> GroupMemory:
        clusters = store.clusters()
        info = resolve_cluster(clusters, bootstrap)
        if info is None:
            return GroupMemory(path, kept=tuple(c.name for c in clusters))
        return GroupMemory(path, info.name,
                           episodes=tuple(store.episodes(info.key, group, since_ms, until_ms,
                                                         limit)),
                           lag=store.lag(info.key, group, since_ms, until_ms,
                                         partitions=False))

    found, error = _memory_for(path).read(load)
    if found is None:
        return GroupMemory(path, error=problem or error)
    return GroupMemory(found.path, found.cluster, found.kept, found.episodes, found.lag,
                       problem)


def _close_memory(memory: SharedMemory) -> None:
    memory.close()


def _cached_memory(func: Callable) -> Callable:
    import streamlit as st

    return st.cache_resource(show_spinner=False, max_entries=4, on_release=_close_memory)(func)


@_cached_memory
def _memory_for(path: str) -> SharedMemory:
    return SharedMemory(path)
