"""`/healthz`: whether this process still reads its cluster, for a load balancer or a probe.

Served beside `/metrics` on the same port, without the credentials `/metrics` may ask for (a
probe carries none): it says only "ok" or why not, in one line with no address, group or
error text in it, so it tells an unauthenticated caller nothing about the cluster.
"""

from __future__ import annotations

from backend.contracts.overview import Overview

HEALTH_PATH = "/healthz"
STALE_CYCLES = 3  # unhealthy after this many intervals without a successful cycle ...
STALE_AT_LEAST_S = 60.0  # ... and never sooner than this (a slow cycle of a big cluster)


def health(overview: Overview | None, now_ms: int, interval_s: float) -> tuple[int, str]:
    """(HTTP status, one line): 200 while the last cycle read the cluster and is recent."""
    if overview is None:
        return 503, "starting: no cycle of the cluster has finished yet"
    if overview.error is not None or overview.cycle is None:
        return 503, "the last cycle could not read the cluster (the process's log says why)"
    cycle = overview.cycle
    age_s = max(0.0, (now_ms - cycle.started_ms) / 1000 - cycle.seconds)
    stale_s = max(STALE_CYCLES * interval_s, STALE_AT_LEAST_S)
    if age_s > stale_s:
        return 503, f"stale: the last successful cycle ended {age_s:.0f} s ago"
    return 200, f"ok: the last cycle ended {age_s:.0f} s ago"
