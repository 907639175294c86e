"""Feeds the memory from a watcher, on a thread of its own, so the live view never waits.

The watcher hands over what each cycle learnt (`submit`) and goes on; a writer thread opens
the store, takes the cluster's writer lease, writes each cycle in one transaction and, every
few minutes, folds and trims (`HistoryStore.maintain`). What cannot be written yet waits in a
bounded queue: past it the oldest cycles' lag is dropped (counted), never their episodes.

A store that cannot be opened or written (locked, damaged, disk full, read-only) is one line
in `error` and in the log, retried every RETRY_S; the watcher and its pages go on without it.

The recorder also keeps what outputs must continue across restarts: the counters /metrics
exports (read back from the store when it opens, then only ever raised) and the supervisor's
recent actions, which the episode tracker joins to the episodes of its replicas.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from backend.contracts.history import (
    DEFAULT_MAX_BYTES,
    DEFAULT_RETENTION_DAYS,
    MEMBERSHIP_CHANGES,
    Action,
    Episode,
    StateChange,
)
from backend.errors import one_line
from backend.history.episodes import ACTION_LOOKBACK_MS
from backend.history.sqlite import SqliteStore
from backend.history.store import CounterKey, Cycle, GroupLag, HistoryStore, Seed, StoreError

log = logging.getLogger("groupscope.history")

DAY_MS = 86_400_000
RETRY_S = 30.0
MAINTAIN_EVERY_S = 300.0
LEASE_TTL_MS = 60_000  # a writer that stopped renewing its lease is replaced after this
CLAIM_RETRY_S = 5.0  # how often a process that does not hold the lease asks for it again
MAX_PENDING = 120  # cycles waiting for the store before the oldest lose their lag
COUNTED_KEEP = 100_000  # episodes remembered as counted (per process)

REBALANCES, MEMBERSHIP, UNOWNED = (
    "rebalances", "membership_changes", "unowned_partition_seconds")


def owner_name(role: str) -> str:
    return f"{role} pid {os.getpid()} on {socket.gethostname()}"


class HistoryRecorder:
    """The memory of one cluster's groups for one process; `path` None keeps the counters
    in memory only (--no-history)."""

    def __init__(self, path: Path | str | None, role: str,
                 retention_days: float = DEFAULT_RETENTION_DAYS,
                 max_bytes: int = DEFAULT_MAX_BYTES,
                 open_store: Callable[[str], HistoryStore] | None = None) -> None:
        self.path = None if path is None else str(path)
        self.owner = owner_name(role)
        self.retention_ms = int(retention_days * DAY_MS)
        self.max_bytes = max_bytes
        self._open_store = open_store
        self.cluster: str | None = None
        self.name: str | None = None
        self.error: str | None = None  # one line while the store cannot be used
        self.holder = False  # this process writes the cluster's cycles
        self.dropped_points = 0
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._pending: deque[Cycle] = deque()
        self._new_actions: list[Action] = []
        self._actions: dict[str, deque[Action]] = {}  # group -> its recent actions
        self._seen_actions: set[tuple] = set()
        self._counted: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._counters: dict[CounterKey, float] = {}
        self._dirty: set[CounterKey] = set()
        self._seed: Seed | None = None
        self._seeded = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._store: HistoryStore | None = None
        self._claimed_at = 0.0  # time.monotonic() of the last claim; 0: claim at once
        self._logged: str | None = None

    # ---- the watcher's side (never blocks on the store) ------------------------------------

    def start(self) -> HistoryRecorder:
        if self.path is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="history-writer",
                                            daemon=True)
            self._thread.start()
        return self

    def set_cluster(self, key: str | None, name: str) -> None:
        """Kafka's cluster id (the key the memory files it under) and the servers it is read
        at; without an id, the servers are the key."""
        with self._lock:
            self.cluster, self.name = key or name, name

    def submit(self, taken_ms: int, episodes: Iterable[Episode] = (),
               states: Iterable[StateChange] = (), lag: Iterable[GroupLag] = ()) -> None:
        """One cycle's changes; counts the episodes that ended for the first time."""
        episodes = list(episodes)
        with self._lock:
            for ep in episodes:
                if ep.end_ms is not None and (ep.group, ep.start_ms) not in self._counted:
                    self._count(ep)
            if self.path is None or self.cluster is None:
                return
            cycle = Cycle(self.cluster, self.name or self.cluster, taken_ms, episodes,
                          list(states), list(lag),
                          {k: self._counters[k] for k in self._dirty})
            self._dirty.clear()
            self._pending.append(cycle)
            while len(self._pending) > MAX_PENDING:
                oldest = self._pending.popleft()
                self.dropped_points += len(oldest.lag)
                self._pending[0] = _merge(oldest, self._pending[0])
            self._wake.notify()

    def record_action(self, action: Action) -> None:
        """What the supervisor did; joined to its replica's next episode at once, and kept."""
        with self._lock:
            self._remember(action)
            if self.path is not None:
                self._new_actions.append(action)
                self._wake.notify()

    def actions(self, group: str, now_ms: int) -> list[Action]:
        """The supervisor's recent actions on the group's replicas (own or read back)."""
        mine = self._actions.get(group)
        if not mine:  # most groups, every cycle: no lock, no list
            return []
        since = now_ms - ACTION_LOOKBACK_MS - 60_000
        with self._lock:
            return [a for a in mine if a.ts_ms >= since]

    def take_seed(self) -> Seed | None:
        """What the store held when it opened (episode starts of the last day, last causes),
        once; None before it is read, and after."""
        with self._lock:
            seed, self._seed = self._seed, None
            return seed

    def counters(self) -> dict[CounterKey, float]:
        with self._lock:
            return dict(self._counters)

    def close(self, timeout: float = 5.0) -> None:
        """Write what is pending (within `timeout`), release the lease, close the store."""
        self._stop.set()
        with self._lock:
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    # ---- counting --------------------------------------------------------------------------

    def _count(self, ep: Episode) -> None:
        self._counted[(ep.group, ep.start_ms)] = None
        while len(self._counted) > COUNTED_KEEP:
            self._counted.popitem(last=False)
        if ep.rebalance:
            self._add(CounterKey(ep.group, REBALANCES, ep.cause), 1)
        for c in ep.causes:
            if c.kind in MEMBERSHIP_CHANGES:
                self._add(CounterKey(ep.group, MEMBERSHIP, c.kind), 1)
        if ep.impact.unowned_partition_seconds:
            self._add(CounterKey(ep.group, UNOWNED, ""), ep.impact.unowned_partition_seconds)

    def _add(self, key: CounterKey, value: float) -> None:
        self._counters[key] = self._counters.get(key, 0.0) + value
        self._dirty.add(key)

    def _remember(self, action: Action) -> None:
        key = (action.ts_ms, action.group, action.replica, action.action)
        if key not in self._seen_actions:
            self._seen_actions.add(key)
            self._actions.setdefault(action.group, deque(maxlen=200)).append(action)
            if len(self._seen_actions) > 10_000:
                self._seen_actions = {(a.ts_ms, a.group, a.replica, a.action)
                                      for kept in self._actions.values() for a in kept}

    # ---- the writer thread ----------------------------------------------------------------

    def _run(self) -> None:
        last_maintain = time.monotonic()
        while True:
            if self._store is None and not self._open():
                if self._stop.wait(RETRY_S):
                    break
                continue
            with self._lock:
                if not (self._pending or self._new_actions or self._stop.is_set()):
                    self._wake.wait(1.0)
                cluster = self.cluster
                cycles, self._pending = list(self._pending), deque()
                actions: list[Action] = []
                if cluster is not None:  # filed under the cluster's key, once it is known
                    actions, self._new_actions = self._new_actions, []
            try:
                if cluster is not None and not self._seeded:
                    self._load(cluster)
                now_ms = int(time.time() * 1000)
                every = LEASE_TTL_MS / 3000 if self.holder else CLAIM_RETRY_S
                if cluster is not None and time.monotonic() - self._claimed_at > every:
                    self._claim(cluster, now_ms)
                    self._claimed_at = time.monotonic()
                store = self._store
                assert store is not None
                for action in actions:
                    store.add_action(cluster, action)  # type: ignore[arg-type]
                if self.holder:
                    for cycle in cycles:
                        store.write(cycle)
                if cluster is not None:
                    for action in store.actions(cluster, now_ms - ACTION_LOOKBACK_MS - 60_000):
                        with self._lock:
                            self._remember(action)
                if self.holder and time.monotonic() - last_maintain > MAINTAIN_EVERY_S:
                    last_maintain = time.monotonic()
                    done = store.maintain(now_ms, self.retention_ms, self.max_bytes)
                    log.debug("history upkeep: %s", done)
                if self.error is not None:
                    log.warning("history store %s usable again", self.path)
                self.error = None
            except StoreError as exc:
                self._fail(str(exc))
                with self._lock:  # what was taken out goes back, ahead of newer cycles
                    self._pending.extendleft(reversed(cycles))
                    self._new_actions[:0] = actions
                continue
            if self._stop.is_set():
                with self._lock:
                    if not self._pending and (not self._new_actions or self.cluster is None):
                        break
        self._shut()

    def _open(self) -> bool:
        try:
            if self._open_store is not None:
                self._store = self._open_store(self.path or "")
            else:
                self._store = SqliteStore(self.path or "")
        except StoreError as exc:
            self._fail(str(exc))
            return False
        except Exception as exc:  # anything else: still one line, and the view goes on
            self._fail(f"history store {self.path} cannot be opened: {one_line(exc)}")
            return False
        return True

    def _load(self, cluster: str) -> None:
        assert self._store is not None
        seed = self._store.seed(cluster, int(time.time() * 1000) - DAY_MS)
        with self._lock:
            for key, value in seed.counters.items():
                if value > self._counters.get(key, 0.0):
                    self._counters[key] = value
            self._seed = seed
            self._seeded = True

    def _claim(self, cluster: str, now_ms: int) -> None:
        assert self._store is not None
        was = self.holder
        self.holder = self._store.claim(cluster, self.owner, now_ms, LEASE_TTL_MS)
        if self.holder and not was:
            if self._seeded:  # taking over from another writer: continue from its counters
                self._seeded = False
                self._load(cluster)
            log.info("history: recording cluster %s in %s", self.name, self.path)
        elif was and not self.holder:
            log.info("history: another process records cluster %s now", self.name)
        elif not was and not self.holder and self._logged != "reader":
            self._logged = "reader"
            log.info("history: another process records cluster %s in %s; this one reads it",
                     self.name, self.path)

    def _fail(self, line: str) -> None:
        if line != self.error:
            log.warning("%s", line)
        self.error = line
        self.holder = False
        self._claimed_at = 0.0  # reopened, it asks for the lease before writing anything
        if self._store is not None:
            with contextlib.suppress(Exception):
                self._store.close()
            self._store = None

    def _shut(self) -> None:
        store, self._store = self._store, None
        if store is None:
            return
        with contextlib.suppress(Exception):
            if self.holder and self.cluster is not None:
                store.release(self.cluster, self.owner)
        with contextlib.suppress(Exception):
            store.close()


def _merge(older: Cycle, newer: Cycle) -> Cycle:
    """The newer cycle with the older one's episodes, states and counters (not its lag)."""
    later = {(e.group, e.start_ms) for e in newer.episodes}
    episodes = [e for e in older.episodes if (e.group, e.start_ms) not in later]
    return replace(newer, episodes=[*episodes, *newer.episodes],
                   states=[*older.states, *newer.states],
                   counters={**older.counters, **newer.counters})
