"""Synthetic overviews for the exporter's fast tests: rows, partitions, a stand-in `latest`."""

from __future__ import annotations

from backend.contracts.overview import CycleStats, GroupRow, Overview, PartitionLag

CLUSTER = "127.0.0.1:9092"


def part(topic: str, p: int, committed: int | None, end: int, lag_s: float | None = None,
         health: str = "OK") -> PartitionLag:
    lag = end - (committed or 0)
    return PartitionLag(topic=topic, partition=p, committed=committed, end=end,
                        lag_messages=lag, lag_seconds=lag_s, health=health)


def row(group: str, **kw) -> GroupRow:
    base = dict(group=group, state="Stable", protocol="classic", assignor="range", members=2,
                described_ms=1_000)
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
