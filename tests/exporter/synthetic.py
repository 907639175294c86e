"""Synthetic overviews for the exporter's fast tests: rows, partitions, a stand-in `latest`."""

from __future__ import annotations

from backend.contracts.overview import NOTHING_UNREAD, CycleStats, GroupRow, Overview, PartitionLag

CLUSTER = "127.0.0.1:9092"
ROW_MS = 1_000_000  # every row's described_ms unless a test says otherwise


def part(topic: str, p: int, committed: int | None, end: int, lag_s: float | None = None,
         health: str = "OK") -> PartitionLag:
    """A partition lagging `lag_s` seconds as of the rows' `described_ms` (ROW_MS)."""
    lag = end - (committed or 0)
    since = None if lag_s is None else (NOTHING_UNREAD if lag_s == 0 else
                                        ROW_MS - round(lag_s * 1000))
    return PartitionLag(topic=topic, partition=p, committed=committed, end=end,
                        lag_messages=lag, unread_since_ms=since, health=health)


def row(group: str, **kw) -> GroupRow:
    base = dict(group=group, state="Stable", protocol="classic", assignor="range", members=2,
                described_ms=ROW_MS)
    base.update(kw)
    return GroupRow(**base)


def overview(*rows: GroupRow, taken_ms: int = 10_000, cycles: tuple[CycleStats, ...] = (),
             error: str | None = None, listed: int | None = None) -> Overview:
    return Overview(taken_ms=taken_ms, cluster=CLUSTER, rows=tuple(rows),
                    listed=len(rows) if listed is None else listed,
                    cycle=cycles[-1] if cycles else None, error=error, history=cycles)


class Latest:
    """What the collector reads: stands in for the watcher's `latest`."""

    def __init__(self, ov: Overview | None = None) -> None:
        self.ov = ov

    def __call__(self) -> Overview | None:
        return self.ov
