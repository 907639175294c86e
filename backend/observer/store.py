"""Stage 4, store: a bounded, thread-safe history of snapshots for scrubbing back in time.

Snapshots are immutable, so readers get references, never copies, and never see a
half-built one: the observer thread appends, any number of dashboard threads read.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import deque
from dataclasses import replace

from backend.contracts import Snapshot


class SnapshotStore:
    def __init__(self, maxlen: int = 900) -> None:
        if maxlen < 1:
            raise ValueError("maxlen must be at least 1")
        self._items: deque[Snapshot] = deque(maxlen=maxlen)
        self._lock = threading.Lock()

    def append(self, snap: Snapshot) -> None:
        with self._lock:
            if self._items and snap.taken_ms < self._items[-1].taken_ms:
                raise ValueError("snapshots must be appended in time order")
            self._items.append(snap)

    def latest(self) -> Snapshot | None:
        with self._lock:
            return self._items[-1] if self._items else None

    def latest_shown(self) -> Snapshot | None:
        """What a page draws: the newest snapshot, unless its poll failed after an earlier one
        succeeded; then that earlier one, carrying the failure. A transient error (a node
        restarting, a describe timing out) keeps the last figures on the page, stamped with
        their own time and the error, instead of dropping every lane and tile to zero."""
        with self._lock:
            if not self._items or self._items[-1].error is None:
                return self._items[-1] if self._items else None
            failed = self._items[-1]
            good = next((s for s in reversed(self._items) if s.error is None), None)
        return failed if good is None else replace(good, error=failed.error)

    def history(self, since_ms: int | None = None) -> tuple[Snapshot, ...]:
        with self._lock:
            items = tuple(self._items)
        if since_ms is None:
            return items
        return tuple(s for s in items if s.taken_ms >= since_ms)

    def at(self, ts_ms: int) -> Snapshot | None:
        """The snapshot that was current at `ts_ms` (the last one taken at or before it)."""
        with self._lock:
            items = tuple(self._items)
        i = bisect_right([s.taken_ms for s in items], ts_ms)
        return items[i - 1] if i else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    @property
    def maxlen(self) -> int:
        return self._items.maxlen or 0
