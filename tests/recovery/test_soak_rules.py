"""The soak's replica-slot rule: a trend across incarnations fails, batch-size spread does not."""

from __future__ import annotations

from backend.stack.soak import Tick, judge_replica_slot

MB = 2**20


def _ticks(peaks_mb: list[int], life: float = 30.0) -> list[Tick]:
    """One incarnation per peak, born one after the other, each sampled at birth and peak."""
    ticks = []
    for i, peak in enumerate(peaks_mb):
        born = 100.0 + i * life
        for t, rss in ((born, 120), (born + life - 1, peak)):
            ticks.append(Tick(t, {f"replica:r{i}": {"rss": rss * MB, "fds": 34, "threads": 24,
                                                    "procs": 1}}, []))
    return ticks


def test_spread_from_batch_size_without_a_trend_passes() -> None:
    report = judge_replica_slot(_ticks([165, 240, 170, 168, 235, 166]), 0.0, 20.0)
    assert report.verdict == "ok", report.problems


def test_memory_growing_across_incarnations_fails() -> None:
    report = judge_replica_slot(_ticks([150, 160, 170, 200, 220, 240]), 0.0, 20.0)
    assert report.verdict == "FAIL"
    assert "later incarnations" in report.problems[0]
