"""Stage 3a, the rebalance timeline of the watched group, for the Live page (pure, no I/O).

The episodes, their causes and impact are the memory's tracker's (`backend/history/
episodes.py`), the same that records every group of a cluster: here it is fed one group's
observations, on its watched topic, twice a second, and its episodes are shown as the
Snapshot's `RebalanceView`s.
"""

from __future__ import annotations

from backend.contracts import RebalanceView
from backend.contracts.history import Episode
from backend.history.episodes import EpisodeTracker
from backend.history.frames import Frame, frame_of
from backend.observer.collect import RawObservation


def frame(obs: RawObservation, topic: str, lag: int | None = None) -> Frame:
    return frame_of(obs.taken_ms, obs.state, obs.protocol, obs.assignor, obs.generation,
                    obs.target_epoch, obs.members, obs.committed, obs.end_offsets,
                    obs.partition_counts, lag, topic=topic)


def rebalance_view(ep: Episode) -> RebalanceView:
    return RebalanceView(
        start_ms=ep.start_ms, end_ms=ep.end_ms, generation=ep.generation_after,
        joined=ep.joined, left=ep.left,
        moved=tuple((m.partition, m.source, m.target) for m in ep.impact.moved),
        gap_ms=ep.impact.gap_ms, reason=ep.seen_as,
        previous_generation=ep.generation_before,
        cause=ep.cause if ep.end_ms is not None else "",
        evidence=tuple(c.evidence for c in ep.causes))


class Timeline:
    """Feed frames in time order with `observe`; read `rebalances()` (newest last)."""

    def __init__(self, group: str = "", cluster: str = "", keep: int = 50) -> None:
        self.tracker = EpisodeTracker(cluster, group, keep=keep)

    def observe(self, f: Frame) -> list[Episode]:
        return self.tracker.observe(f)

    @property
    def in_progress(self) -> bool:
        return self.tracker.in_progress

    def rebalances(self) -> tuple[RebalanceView, ...]:
        return tuple(rebalance_view(ep) for ep in self.tracker.episodes())
