"""What the observer saw during a chaos run: rebalances and the longest processing stall."""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.contracts import Snapshot


@dataclass
class StallTracker:
    """Longest wall-clock time the group committed nothing while messages were waiting.

    Fed one point per observer snapshot: (time, sum of committed offsets, total lag). A stall
    starts at the last point where the committed sum advanced (or lag was zero) and lasts while
    lag stays above zero; it ends with the next advance.
    """

    longest_s: float = 0.0
    _since: float | None = None
    _committed: int | None = None

    def observe(self, t: float, committed: int, lag: int) -> None:
        advanced = self._committed is None or committed > self._committed
        self._committed = committed if self._committed is None else max(self._committed,
                                                                          committed)
        if advanced or lag <= 0:
            self._since = t
            return
        if self._since is not None:
            self.longest_s = max(self.longest_s, t - self._since)


@dataclass
class RunMonitor:
    """Folds observer snapshots into the counts the chaos report prints."""

    stalls: StallTracker = field(default_factory=StallTracker)
    rebalance_starts: set[int] = field(default_factory=set)
    longest_rebalance_gap_ms: int = 0
    max_lag: int = 0
    snapshots: int = 0
    errors: int = 0

    def observe(self, t: float, snap: Snapshot) -> None:
        self.snapshots += 1
        if snap.error:
            self.errors += 1
            return
        committed = sum(p.committed or 0 for p in snap.partitions)
        self.stalls.observe(t, committed, snap.total_lag)
        self.max_lag = max(self.max_lag, snap.total_lag)
        for r in snap.rebalances:
            self.rebalance_starts.add(r.start_ms)
            if r.gap_ms:
                self.longest_rebalance_gap_ms = max(self.longest_rebalance_gap_ms, r.gap_ms)

    @property
    def rebalances(self) -> int:
        return len(self.rebalance_starts)
