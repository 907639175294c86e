"""/healthz's answer from the watcher's latest overview (pure)."""

from __future__ import annotations

import pytest

from backend.contracts.overview import CycleStats, Overview
from backend.exporter.health import STALE_AT_LEAST_S, health

NOW = 1_000_000_000


def overview(ended_s_ago: float | None, error: str | None = None) -> Overview:
    cycle = None if ended_s_ago is None else CycleStats(
        started_ms=int(NOW - (ended_s_ago + 2.0) * 1000), seconds=2.0, requests=5,
        groups_refreshed=10, errors=0)
    return Overview(taken_ms=NOW, cluster="kafka-1:9093", cycle=cycle, error=error)


@pytest.mark.parametrize(("latest", "interval", "code", "starts"), [
    (None, 10.0, 503, "starting"),
    (overview(3.0), 10.0, 200, "ok: the last cycle ended 3 s ago"),
    (overview(STALE_AT_LEAST_S - 1), 10.0, 200, "ok"),
    (overview(STALE_AT_LEAST_S + 1), 10.0, 503, "stale"),
    (overview(STALE_AT_LEAST_S + 1), 30.0, 200, "ok"),  # three intervals of a slow cadence
    (overview(None, error="cannot reach kafka-1:9093"), 10.0, 503, "the last cycle could not"),
])
def test_healthy_while_the_last_cycle_read_the_cluster_recently(latest, interval, code, starts):
    got, line = health(latest, NOW, interval)
    assert got == code and line.startswith(starts)
    assert "kafka-1" not in line  # nothing about the cluster to a caller without credentials
